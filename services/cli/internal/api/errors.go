package api

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrNoKey means no API key was given.
var ErrNoKey = errors.New("no API key: set ALICIA_API_KEY or pass --key (alicia up prints a development key)")

// ErrUnreachable wraps a failure to reach the gateway at all.
var ErrUnreachable = errors.New("cannot reach the gateway")

// Error is an answer of the gateway with an error status.
type Error struct {
	Method, Path string
	Status       int    // HTTP status
	Code         int    // the API's error code (usually the status)
	Message      string // the API's error message
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "(no error message)"
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), msg)
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

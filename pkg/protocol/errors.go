package protocol

import (
	"errors"
	"fmt"
)

// Protocol error codes (proto-schemas/PROTOCOL.md, "Error codes").
const (
	CodeMalformed          int32 = 101 // malformed envelope
	CodeUnknownType        int32 = 102 // unknown message type
	CodeInvalidBody        int32 = 103 // body does not match its schema
	CodeTooLarge           int32 = 104 // envelope larger than MaxEnvelopeSize
	CodeNotFound           int32 = 201 // conversation not found
	CodeInvalidState       int32 = 202
	CodeForbidden          int32 = 203
	CodeToolNotFound       int32 = 301
	CodeInvalidParameters  int32 = 302
	CodeToolTimeout        int32 = 304
	CodeInternal           int32 = 501
	CodeBackendUnavailable int32 = 503 // model backend unavailable
	CodeOverloaded         int32 = 504
	CodeOverBudget         int32 = 505 // input over one of the user's budgets
)

// MaxEnvelopeSize is the largest encoded envelope Decode and DecodeJSON accept.
var MaxEnvelopeSize = 1 << 20

// Error is a protocol-level failure that can be reported to a client as an
// ErrorMessage with Code.
type Error struct {
	Code   int32
	Reason string // human-readable, names the offending field
}

func (e *Error) Error() string {
	return fmt.Sprintf("protocol error %d: %s", e.Code, e.Reason)
}

// Code returns the protocol code of the first *Error in err's chain, or 0.
func Code(err error) int32 {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}

func errorf(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

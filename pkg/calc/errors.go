package calc

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error returned by Eval is an *Error wrapping one of them.
var (
	ErrSyntax          = errors.New("syntax error")
	ErrDivisionByZero  = errors.New("division by zero")
	ErrUnknownFunction = errors.New("unknown function")
	ErrUnknownName     = errors.New("unknown name")
	ErrArgCount        = errors.New("wrong number of arguments")
	ErrDomain          = errors.New("argument out of domain")
	ErrNotFinite       = errors.New("result is not a finite number")
	ErrTooLong         = errors.New("expression too long")
	ErrTooDeep         = errors.New("expression nested too deeply")
)

// Error is an evaluation error at a 1-based character position (0 when the
// error is about the whole expression).
type Error struct {
	Pos  int
	Msg  string
	Kind error
}

func (e *Error) Error() string {
	if e.Pos <= 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s at %d", e.Msg, e.Pos)
}

// Unwrap lets errors.Is match the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

func errAt(kind error, pos int, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

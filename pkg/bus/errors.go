package bus

import (
	"errors"
	"fmt"
	"time"
)

// ErrPermanent marks an error that redelivery cannot fix: the envelope is
// dead-lettered and terminated.
var ErrPermanent = errors.New("permanent")

// Permanent wraps err so the router dead-letters the envelope instead of retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// RetryAfter is an error that asks for redelivery after Delay.
type RetryAfter struct {
	Err   error
	Delay time.Duration
}

func (e *RetryAfter) Error() string { return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err) }
func (e *RetryAfter) Unwrap() error { return e.Err }

// Retry wraps err so the router naks with the given delay.
func Retry(err error, delay time.Duration) error { return &RetryAfter{Err: err, Delay: delay} }

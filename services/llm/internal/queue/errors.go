package queue

import "errors"

var (
	// ErrNoSource: a message in LLM_TURNS did not come from CONVERSATIONS.
	ErrNoSource = errors.New("queue: message has no CONVERSATIONS source")
	// ErrPermanent marks a handler error that must not be retried.
	ErrPermanent = errors.New("permanent")
)

// Permanent wraps err so the turn is terminated instead of redelivered.
func Permanent(err error) error { return errors.Join(ErrPermanent, err) }

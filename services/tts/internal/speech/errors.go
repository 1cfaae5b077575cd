package speech

import "errors"

// Errors.
var (
	// ErrStopped cancels a turn that a ControlStop ended.
	ErrStopped = errors.New("speech: turn stopped")
	// ErrShutdown cancels the turns of a replica that is stopping; another
	// replica resumes them.
	ErrShutdown = errors.New("speech: shutting down")
	// errTurnOver ends a turn's reading (final sentence, newer turn, idle).
	errTurnOver = errors.New("speech: turn over")
)

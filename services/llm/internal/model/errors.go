package model

import "errors"

var (
	// ErrUnavailable: the backend could not answer (down, 5xx, 429, timed
	// out, cut the stream) after the allowed attempts, or the breaker is open.
	ErrUnavailable = errors.New("model backend unavailable")
	// ErrBreakerOpen: the circuit breaker fails requests fast (wraps into ErrUnavailable).
	ErrBreakerOpen = errors.New("circuit breaker open")
	// ErrRejected: the backend refused the request itself (4xx other than 408/429).
	ErrRejected = errors.New("model backend rejected the request")
	// ErrIdleTimeout: nothing arrived from the backend within the timeout.
	ErrIdleTimeout = errors.New("no data from the model backend within the timeout")
	// ErrTruncated: the stream ended without a finish reason (connection cut).
	ErrTruncated = errors.New("model stream ended before it finished")
)

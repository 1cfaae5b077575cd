package app

import "errors"

// Errors a use case reports; ports map them to reply codes.
var (
	// ErrInvalid: the request is malformed (400).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: the memory does not exist or belongs to another user (404).
	ErrNotFound = errors.New("memory not found")
	// ErrUnavailable: a backend (embeddings, LLM, Postgres, persistence) is
	// down or unusable (503).
	ErrUnavailable = errors.New("backend unavailable")
)

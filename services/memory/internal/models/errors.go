package models

import "errors"

// Sentinel errors of the model clients.
var (
	// ErrUnavailable: the backend did not answer usefully (connection
	// refused, timeout, 5xx, 429) after the retries.
	ErrUnavailable = errors.New("model backend unavailable")
	// ErrRejected: the backend refused the request (4xx other than 429);
	// retrying the same request cannot help.
	ErrRejected = errors.New("model backend rejected the request")
	// ErrDimensions: the embedding model returned vectors of another size
	// than the memory column holds.
	ErrDimensions = errors.New("embedding has the wrong number of dimensions")
	// ErrMalformed: the LLM's answer is not the JSON the schema asks for.
	ErrMalformed = errors.New("model answer is not the expected JSON")
)

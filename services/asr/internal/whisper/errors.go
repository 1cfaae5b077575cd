package whisper

import "errors"

var (
	// ErrUnavailable: the backend could not answer (down, 5xx, 429, timed
	// out, misconfigured: 401, 403, 404) after the allowed attempts.
	ErrUnavailable = errors.New("transcription backend unavailable")
	// ErrRejected: the backend refused the request itself (400, 413, 415,
	// 422): retrying the same audio cannot help.
	ErrRejected = errors.New("transcription backend rejected the request")
)

package synth

import "errors"

// Errors. ErrUnavailable is worth a retry (the backend is down, overloaded
// or timed out); ErrRejected is not (the backend refused the request).
var (
	ErrUnavailable = errors.New("synth: backend unavailable")
	ErrRejected    = errors.New("synth: backend rejected the request")
	ErrNoAudio     = errors.New("synth: backend returned no audio")
	ErrBadAudio    = errors.New("synth: backend returned audio that is not 16-bit PCM")
	ErrNoEspeak    = errors.New("synth: espeak-ng not found")
)

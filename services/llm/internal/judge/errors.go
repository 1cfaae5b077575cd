package judge

import "errors"

var (
	// ErrMalformed: the judge model's reply is not the JSON object asked
	// for (missing or extra keys, a score outside 0..1, no rationale).
	ErrMalformed = errors.New("judge: malformed judge reply")
	// ErrRejected: the judge backend refused the request (a 4xx other than
	// 408/429): retrying the same request would not help.
	ErrRejected = errors.New("judge: request rejected by the judge backend")
)

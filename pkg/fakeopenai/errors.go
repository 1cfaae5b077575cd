package fakeopenai

import "errors"

// ErrNoTurn is reported (as an HTTP 500 body) when no script answers a chat
// request and no fallback turn is set: an unscripted call is a test bug.
var ErrNoTurn = errors.New("fakeopenai: no scripted turn for this request")

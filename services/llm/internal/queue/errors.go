package queue

import "errors"

// ErrNoSource: a message in LLM_TURNS did not come from CONVERSATIONS.
var ErrNoSource = errors.New("queue: message has no CONVERSATIONS source")

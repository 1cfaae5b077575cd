package store

import "errors"

// ErrNotFound: no such message in the conversation.
var ErrNotFound = errors.New("store: message not found")

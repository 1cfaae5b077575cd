package store

import "errors"

// ErrNotFound: no such memory (or message).
var ErrNotFound = errors.New("not found")

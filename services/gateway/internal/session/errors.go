package session

import "errors"

// ErrNotFound: no such session (never opened, signed out or expired).
var ErrNotFound = errors.New("session: not found")

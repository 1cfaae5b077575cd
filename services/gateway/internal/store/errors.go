package store

import "errors"

var (
	// ErrNotFound: no such row, or it was deleted.
	ErrNotFound = errors.New("store: not found")
	// ErrForbidden: the row belongs to another user.
	ErrForbidden = errors.New("store: belongs to another user")
	// ErrBadCursor: a paging cursor this store did not hand out.
	ErrBadCursor = errors.New("store: invalid cursor")
)

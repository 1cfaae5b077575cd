package store

import "errors"

var errNoMemory = errors.New("memory action without a memory")

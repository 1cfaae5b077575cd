package voicee2e_test

import (
	"errors"
	"fmt"
)

var errNotYet = errors.New("not yet")

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

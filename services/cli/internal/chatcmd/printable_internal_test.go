package chatcmd

import (
	"errors"
	"testing"
)

func TestPrintableError(t *testing.T) {
	inner := errors.New("denied\x1b[2J")
	err := error(printableError{inner})
	if got := err.Error(); got != `denied\x1b[2J` {
		t.Fatalf("Error() = %q", got)
	}
	if !errors.Is(err, inner) {
		t.Fatal("the printable error hides the error it holds")
	}
}

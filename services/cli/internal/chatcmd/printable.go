package chatcmd

import "github.com/alicia-voice/alicia/services/cli/internal/style"

// printableError is an error whose message is printable (main prints what
// Run returns, and a server's words may be in it); errors.Is and As still
// see the error it holds.
type printableError struct{ err error }

func (e printableError) Error() string { return style.Printable(e.err.Error()) }
func (e printableError) Unwrap() error { return e.err }

package turn

import "errors"

// ErrStopped is the cancel cause of a turn stopped by a ControlStop.
var ErrStopped = errors.New("stopped by the client")

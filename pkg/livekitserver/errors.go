package livekitserver

import "errors"

var (
	// ErrNotInstalled: no livekit-server binary was found (see InstallHint).
	ErrNotInstalled = errors.New("livekitserver: livekit-server is not installed")
	// ErrExited: the server process ended before it answered, or while running.
	ErrExited = errors.New("livekitserver: livekit-server exited")
	// ErrBadOptions: Start was given options it cannot use.
	ErrBadOptions = errors.New("livekitserver: bad options")
)

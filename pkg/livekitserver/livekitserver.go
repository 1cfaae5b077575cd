// Package livekitserver finds, installs and runs the livekit-server binary
// that Alicia's dev stack and WebRTC tests use.
//
// The binary is LiveKit's own server at Version, built from the Go module
// proxy (newer tags do not build from it):
//
//	GOBIN=<dir> go install github.com/livekit/livekit-server/cmd/server@v1.13.5
//
// The command is named "server"; Install builds it into the cache
// (~/.cache/alicia/bin) and renames it livekit-server. Find looks in
// $ALICIA_LIVEKIT_SERVER_BIN, then the cache, then PATH.
//
// Start runs it as a child process with a generated config that binds only
// what it owns: the HTTP/WebSocket signalling port and the single UDP port
// of the ICE mux on the given address, and the ICE/TCP port (which LiveKit
// binds on every address) — all three chosen free. It advertises
// Options.NodeIP, asks no STUN server (use_external_ip false), runs a single
// node (no Redis) and logs at warn.
package livekitserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/alicia-voice/alicia/pkg/childproc"
)

// Version is the livekit-server release Alicia runs.
const Version = "v1.13.5"

// Module is the package go install builds (its command is named server).
const Module = "github.com/livekit/livekit-server/cmd/server"

// EnvBin names the environment variable that points at a livekit-server
// binary to use instead of the cached or PATH one.
const EnvBin = "ALICIA_LIVEKIT_SERVER_BIN"

// BinaryName is the name of the installed binary.
const BinaryName = "livekit-server"

// InstallHint says how to install the binary, for error messages.
const InstallHint = "install it with `go run ./services/cli/cmd/alicia dev livekit-install` " +
	"(or the Taskfile's tools task; builds " + Module + "@" + Version + " into ~/.cache/alicia/bin, ~3 min), " +
	"or set " + EnvBin + " to a livekit-server binary"

// BinDir returns where Install puts the binary: $ALICIA_CACHE_DIR/bin, else
// $XDG_CACHE_HOME/alicia/bin, else ~/.cache/alicia/bin (the cache localpg
// uses).
func BinDir() (string, error) {
	if d := os.Getenv("ALICIA_CACHE_DIR"); d != "" {
		return filepath.Abs(filepath.Join(d, "bin"))
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Abs(filepath.Join(d, "alicia", "bin"))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("livekitserver: no cache directory: set ALICIA_CACHE_DIR: %w", err)
	}
	return filepath.Join(home, ".cache", "alicia", "bin"), nil
}

// Find returns the path of the livekit-server binary: $ALICIA_LIVEKIT_SERVER_BIN
// (which must then be an executable file), else the one Install put in
// BinDir, else livekit-server on PATH. It returns an error wrapping
// ErrNotInstalled when there is none.
func Find() (string, error) {
	if p := os.Getenv(EnvBin); p != "" {
		if err := Executable(p); err != nil {
			return "", fmt.Errorf("livekitserver: %s=%s: %w", EnvBin, p, err)
		}
		return filepath.Abs(p)
	}
	if dir, err := BinDir(); err == nil {
		p := filepath.Join(dir, BinaryName)
		if Executable(p) == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(BinaryName); err == nil {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("%w: %s", ErrNotInstalled, InstallHint)
}

// Executable reports why p is not an executable file (nil when it is).
func Executable(p string) error { return childproc.Executable(p) }

// Ensure returns Find's binary, installing it first when there is none.
func Ensure(ctx context.Context, log io.Writer) (string, error) {
	return childproc.FindOrBuild(Find, ErrNotInstalled, func() (string, error) { return Install(ctx, log) })
}

// Install builds livekit-server Version with go install into BinDir and
// returns its path. It takes about 3 minutes on two cores the first time
// (much less with a warm Go build cache). Concurrent installs wait for each
// other; one that finds the binary already installed returns at once.
func Install(ctx context.Context, log io.Writer) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	return childproc.Build{
		Name: "livekitserver",
		Path: filepath.Join(dir, BinaryName),
		Lock: filepath.Join(dir, ".livekit-server.lock"),
		Log:  log,
		Make: func(ctx context.Context, tmp string, log io.Writer) (string, error) {
			fmt.Fprintf(log, "livekitserver: building %s@%s into %s (about 3 minutes the first time)\n", Module, Version, dir)
			// GOWORK=off: the build must not see the workspace of the current directory.
			cmd, err := childproc.GoCommand(ctx, tmp, append(os.Environ(), "GOBIN="+tmp, "GOWORK=off"), log, "install", Module+"@"+Version)
			if err != nil {
				return "", fmt.Errorf("livekitserver: %w", err)
			}
			if err := cmd.Run(); err != nil {
				return "", fmt.Errorf("livekitserver: go install %s@%s: %w", Module, Version, err)
			}
			return filepath.Join(tmp, "server"), nil
		},
	}.Run(ctx)
}

// LockFile takes an exclusive flock on path, waiting (and honouring ctx)
// while another process holds it: one build into BinDir at a time. The
// returned function releases it.
func LockFile(ctx context.Context, path string) (func(), error) {
	unlock, err := childproc.LockFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("livekitserver: %w", err)
	}
	return unlock, nil
}

// childEnv is the environment of the server: this process's, without the
// variables livekit-server would read as settings over its config file.
func childEnv() []string {
	return childproc.EnvWithout(func(k string) bool {
		return strings.HasPrefix(k, "LIVEKIT_") || k == "NODE_IP" || k == "UDP_PORT" || k == "REDIS_HOST" || k == "REDIS_PASSWORD"
	})
}

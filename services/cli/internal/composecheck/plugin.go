package composecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/livekitserver"
)

// The compose plugin checked against: `docker compose` at this release,
// built from its Go module.
const (
	ComposeModule  = "github.com/docker/compose/v2"
	ComposeVersion = "v2.40.3"
)

// Plugin returns the path of the docker-compose binary at ComposeVersion,
// building it into the cache the first time (~/.cache/alicia/bin, as
// livekit-server; about 3.5 minutes on two cores with an empty Go cache,
// instant afterwards). `go run module/cmd@version` refuses this module (its
// go.mod has exclude directives), so it is built as the main module from
// the module cache: go mod download, then go build ./cmd in its directory.
// Concurrent calls wait for each other.
func Plugin(ctx context.Context, log io.Writer) (string, error) {
	return buildTool(ctx, log, ComposeModule, ComposeVersion, "./cmd", "docker-compose-"+ComposeVersion,
		"-s -w -X "+ComposeModule+"/internal.Version="+ComposeVersion)
}

// The Caddy of the tls profile (composecheck.Images' caddy image), as its
// proxy test runs it.
const (
	CaddyModule  = "github.com/caddyserver/caddy/v2"
	CaddyVersion = "v2.11.4"
)

// Caddy returns the path of caddy at CaddyVersion, built from its module
// into the cache the first time like Plugin (about 4.5 minutes on two
// cores with an empty Go cache).
func Caddy(ctx context.Context, log io.Writer) (string, error) {
	return buildTool(ctx, log, CaddyModule, CaddyVersion, "./cmd/caddy", "caddy-"+CaddyVersion, "-s -w")
}

// buildTool returns the binary name in the cache's bin directory, building
// pkg of module@version there first when it is missing: the module is
// downloaded into the module cache and built as the main module (its own
// go.mod and go.sum, never this repository's workspace).
func buildTool(ctx context.Context, log io.Writer, module, version, pkg, name, ldflags string) (string, error) {
	dir, err := livekitserver.BinDir()
	if err != nil {
		return "", err
	}
	final := filepath.Join(dir, name)
	if livekitserver.Executable(final) == nil {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("composecheck: %w", err)
	}
	lock := strings.TrimSuffix(name, "-"+version)
	unlock, err := livekitserver.LockFile(ctx, filepath.Join(dir, "."+lock+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if livekitserver.Executable(final) == nil {
		return final, nil // built while we waited
	}
	fmt.Fprintf(log, "composecheck: building %s@%s into %s (minutes the first time)\n", module, version, dir)
	start := time.Now()
	src, err := download(ctx, module+"@"+version)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("composecheck: %w", err)
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", built, pkg)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("composecheck: go build %s@%s: %w", module, version, err)
	}
	if err := os.Rename(built, final); err != nil {
		return "", fmt.Errorf("composecheck: %w", err)
	}
	fmt.Fprintf(log, "composecheck: built %s in %s\n", final, time.Since(start).Round(time.Second))
	return final, nil
}

// download fetches a module (path@version) into the module cache and
// returns its directory there.
func download(ctx context.Context, modVersion string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", modVersion)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Dir = os.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("composecheck: go mod download: %s", info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("composecheck: go mod download: %w: %s", err, stderr.String())
	}
	if info.Dir == "" {
		return "", errors.New("composecheck: go mod download gave no directory")
	}
	return info.Dir, nil
}

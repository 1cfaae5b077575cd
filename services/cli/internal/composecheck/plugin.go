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
	dir, err := livekitserver.BinDir()
	if err != nil {
		return "", err
	}
	final := filepath.Join(dir, "docker-compose-"+ComposeVersion)
	if livekitserver.Executable(final) == nil {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("composecheck: %w", err)
	}
	unlock, err := livekitserver.LockFile(ctx, filepath.Join(dir, ".docker-compose.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if livekitserver.Executable(final) == nil {
		return final, nil // built while we waited
	}
	fmt.Fprintf(log, "composecheck: building %s@%s into %s (minutes the first time)\n", ComposeModule, ComposeVersion, dir)
	start := time.Now()
	src, err := download(ctx)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("composecheck: %w", err)
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, "docker-compose")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+ComposeModule+"/internal.Version="+ComposeVersion, "-o", built, "./cmd")
	cmd.Dir = src
	// Its own go.mod and go.sum, never the workspace of this repository.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("composecheck: go build %s@%s: %w", ComposeModule, ComposeVersion, err)
	}
	if err := os.Rename(built, final); err != nil {
		return "", fmt.Errorf("composecheck: %w", err)
	}
	fmt.Fprintf(log, "composecheck: built %s in %s\n", final, time.Since(start).Round(time.Second))
	return final, nil
}

// download fetches the module's source into the module cache and returns
// its directory there.
func download(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", ComposeModule+"@"+ComposeVersion)
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

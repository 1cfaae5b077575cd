// Package jaeger builds, caches and runs the Jaeger trace viewer that
// `alicia up --traces` starts: Jaeger v2 all-in-one (an OpenTelemetry
// Collector with Jaeger's query service and in-memory storage), built from
// its Go module at Version.
//
// `go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0` is refused
// (the module's go.mod has a replace directive), so Install downloads the
// module with `go mod download` and builds cmd/jaeger inside it, as its own
// main module:
//
//	cd $(go mod download -json github.com/jaegertracing/jaeger@v1.76.0 | .Dir)
//	go build -o <cache>/jaeger-v1.76.0 ./cmd/jaeger
//
// The binary is cached as jaeger-<Version> in the cache livekit-server uses
// (~/.cache/alicia/bin, see livekitserver.BinDir): a new Version builds a new
// binary (the old ones are removed), the same one is built once. The build
// takes about 6 minutes on two cores the first time.
//
// Start runs it as a child process with a generated configuration that binds
// only 127.0.0.1: the OTLP receiver (gRPC and HTTP), the query service (HTTP:
// the UI and its API; gRPC) and a health check, each on the given port or a
// free one. Traces are kept in memory (the newest MaxTraces). Jaeger's own
// metrics are off.
//
// The Go module carries no build of the Jaeger UI (a React application built
// with npm from another repository): its own page is a placeholder. Start
// serves instead the trace viewer embedded in this package (UI, written to
// Dir/ui): the recent traces, a search by trace or conversation id, and a
// trace's spans as a waterfall with each span's attributes and events, read
// from Jaeger's query API (/api/services, /api/traces, /api/traces/{id}).
// Options.UIAssets serves another directory (a built jaeger-ui) instead.
package jaeger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/alicia-voice/alicia/pkg/childproc"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
)

// Version is the version of the Jaeger Go module that is built: Jaeger v2.
const Version = "v1.76.0"

// Module is the Go module Install downloads and builds.
const Module = "github.com/jaegertracing/jaeger"

// Package is the command built from Module.
const Package = "./cmd/jaeger"

// EnvBin names the environment variable that points at a Jaeger v2 binary
// to run instead of the cached one.
const EnvBin = "ALICIA_JAEGER_BIN"

// ErrNotInstalled: no Jaeger binary was found (see InstallHint).
var ErrNotInstalled = errors.New("jaeger: jaeger " + Version + " is not installed")

// InstallHint says how to install the binary, for messages.
const InstallHint = "install it with `go run ./services/cli/cmd/alicia dev jaeger-install` " +
	"(or the Taskfile's tools task; builds " + Module + "@" + Version + " into ~/.cache/alicia/bin, ~6 min on two cores), " +
	"or set " + EnvBin + " to a Jaeger v2 binary"

// BinaryName is the name of the cached binary: the version is part of it,
// so that another Version is built anew.
const BinaryName = "jaeger-" + Version

// CachedPath is where Install puts the binary.
func CachedPath() (string, error) {
	dir, err := livekitserver.BinDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, BinaryName), nil
}

// Find returns the Jaeger binary: $ALICIA_JAEGER_BIN (which must then be an
// executable file), else the one Install cached. It returns an error
// wrapping ErrNotInstalled when there is none.
func Find() (string, error) {
	if p := os.Getenv(EnvBin); p != "" {
		if err := childproc.Executable(p); err != nil {
			return "", fmt.Errorf("jaeger: %s=%s: %w", EnvBin, p, err)
		}
		return filepath.Abs(p)
	}
	p, err := CachedPath()
	if err == nil && childproc.Executable(p) == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNotInstalled, InstallHint)
}

// Ensure returns Find's binary, installing it first when there is none.
func Ensure(ctx context.Context, log io.Writer) (string, error) {
	return childproc.FindOrBuild(Find, ErrNotInstalled, func() (string, error) { return Install(ctx, log) })
}

// Install builds Jaeger Version from its Go module into the cache and
// returns its path; binaries of other versions there are removed.
// Concurrent installs (processes too) wait for each other; one that finds
// the binary already built returns at once. The go command's output goes to
// log.
func Install(ctx context.Context, log io.Writer) (string, error) {
	final, err := CachedPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(final)
	return childproc.Build{
		Name:  "jaeger",
		Path:  final,
		Lock:  filepath.Join(dir, ".jaeger.lock"),
		Log:   log,
		Prune: filepath.Join(dir, "jaeger-v*"),
		Make: func(ctx context.Context, tmp string, log io.Writer) (string, error) {
			fmt.Fprintf(log, "jaeger: building %s@%s into %s (about 6 minutes on two cores the first time)\n", Module, Version, dir)
			return childproc.ModuleBuild{Name: "jaeger", Module: Module, Version: Version, Package: Package,
				LDFlags: "-X " + Module + "/internal/version.latestVersion=" + Version}.Make(ctx, tmp, log)
		},
	}.Run(ctx)
}

// Package devtools names the programs that Alicia's tests and local stack
// run and that are built from Go modules into the cache (~/.cache/alicia/bin,
// livekitserver.BinDir): livekit-server, Jaeger, Caddy (the compose file's
// tls profile), the docker compose plugin (the compose file's checks),
// Helm (the chart's checks) and golangci-lint (the Go code's lint).
//
// The test task builds every one of them in its tools step (the command
// devtools, `go run ./pkg/devtools/cmd/devtools install`) before any test
// runs and outside any network namespace, reporting the time of each build.
// A test only looks a tool up (Need): a test package in a network namespace
// of its own (pkg/testkit/netns) cannot reach the module proxy, so nothing is
// ever built from a test. Under CI=true a missing tool fails the test with a
// sentence naming the step that installs it; elsewhere the test is skipped.
package devtools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/alicia-voice/alicia/pkg/childproc"
	"github.com/alicia-voice/alicia/pkg/jaeger"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
)

// InstallStep is the command that builds every tool: the test task's tools
// step, and what a message about a missing tool names.
const InstallStep = "go run ./pkg/devtools/cmd/devtools install"

// ErrNotInstalled is wrapped in the error of Find when a tool is not there.
var ErrNotInstalled = errors.New("not installed")

// Tool is one program built from a Go module.
type Tool struct {
	// Name is how the command line and messages call it ("caddy").
	Name string
	// Module and Version are what is built.
	Module, Version string
	// FirstBuild is roughly how long the first build takes on two cores
	// with empty Go caches, for messages.
	FirstBuild time.Duration
	find       func() (string, error)
	install    func(ctx context.Context, log io.Writer) (string, error)
}

// Find returns the tool's path, or an error wrapping ErrNotInstalled that
// says how to install it. It never builds.
func (t Tool) Find() (string, error) {
	p, err := t.find()
	if err == nil {
		return p, nil
	}
	if errors.Is(err, livekitserver.ErrNotInstalled) || errors.Is(err, jaeger.ErrNotInstalled) || errors.Is(err, os.ErrNotExist) {
		return "", missingError{t}
	}
	return "", fmt.Errorf("%s: %w", t.Name, err)
}

// missingError is Find's error for a tool that is not there: Missing's
// sentence, wrapping ErrNotInstalled.
type missingError struct{ t Tool }

func (e missingError) Error() string { return e.t.Missing() }
func (e missingError) Unwrap() error { return ErrNotInstalled }

// Missing is the sentence that says the tool is missing and which step
// installs it.
func (t Tool) Missing() string {
	return fmt.Sprintf("%s %s is not installed: the test task's tools step builds it before the tests run (`%s %s`, about %s the first time)",
		t.Name, t.Version, InstallStep, t.Name, t.FirstBuild)
}

// Ensure returns the tool's path, building it first when Find finds none.
// built reports whether it did.
func (t Tool) Ensure(ctx context.Context, log io.Writer) (path string, built bool, err error) {
	if p, err := t.Find(); err == nil {
		return p, false, nil
	} else if !errors.Is(err, ErrNotInstalled) {
		return "", false, err
	}
	p, err := t.install(ctx, log)
	return p, err == nil, err
}

// The tools.
var (
	LiveKit = Tool{Name: "livekit-server", Module: livekitserver.Module, Version: livekitserver.Version, FirstBuild: 3 * time.Minute,
		find: livekitserver.Find, install: livekitserver.Install}
	Jaeger = Tool{Name: "jaeger", Module: jaeger.Module, Version: jaeger.Version, FirstBuild: 6 * time.Minute,
		find: jaeger.Find, install: jaeger.Install}
	// Caddy is the proxy of the compose file's tls profile (its image
	// caddy:2.11.4-alpine).
	Caddy = moduleTool(childproc.ModuleBuild{Name: "caddy", Module: "github.com/caddyserver/caddy/v2", Version: "v2.11.4",
		Package: "./cmd/caddy", LDFlags: "-s -w"}, 5*time.Minute)
	// Compose is the docker compose plugin the compose file is checked
	// with. `go run module/cmd@version` refuses its module (its go.mod has
	// exclude directives), hence a ModuleBuild.
	Compose = moduleTool(childproc.ModuleBuild{Name: "docker-compose", Module: "github.com/docker/compose/v2", Version: "v2.40.3",
		Package: "./cmd", LDFlags: "-s -w -X github.com/docker/compose/v2/internal.Version=v2.40.3"}, 4*time.Minute)
	// Helm checks the chart in deploy/helm/alicia (the Taskfile's
	// helm-check).
	Helm = moduleTool(childproc.ModuleBuild{Name: "helm", Module: "helm.sh/helm/v3", Version: "v3.22.0",
		Package: "./cmd/helm", LDFlags: "-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0"}, 3*time.Minute)
	// GolangciLint lints every Go module with the rule set in
	// .golangci.yml (the Taskfile's lint).
	GolangciLint = moduleTool(childproc.ModuleBuild{Name: "golangci-lint", Module: "github.com/golangci/golangci-lint/v2", Version: "v2.15.0",
		Package: "./cmd/golangci-lint", LDFlags: "-s -w -X main.version=v2.15.0"}, 4*time.Minute)
)

// All are the tools, in the order the tools step builds them.
func All() []Tool { return []Tool{LiveKit, Jaeger, Caddy, Compose, Helm, GolangciLint} }

// Named returns the tool called name.
func Named(name string) (Tool, bool) {
	for _, t := range All() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// moduleTool is a tool built by b into the cache as <name>-<version>.
func moduleTool(b childproc.ModuleBuild, firstBuild time.Duration) Tool {
	path := func() (string, error) {
		dir, err := livekitserver.BinDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, b.Name+"-"+b.Version), nil
	}
	return Tool{Name: b.Name, Module: b.Module, Version: b.Version, FirstBuild: firstBuild,
		find: func() (string, error) {
			p, err := path()
			if err != nil {
				return "", err
			}
			if err := childproc.Executable(p); err != nil {
				return "", err
			}
			return p, nil
		},
		install: func(ctx context.Context, log io.Writer) (string, error) {
			p, err := path()
			if err != nil {
				return "", err
			}
			dir := filepath.Dir(p)
			return childproc.Build{Name: b.Name, Path: p, Log: log, Prune: filepath.Join(dir, b.Name+"-v*"),
				Make: func(ctx context.Context, tmp string, log io.Writer) (string, error) {
					fmt.Fprintf(log, "%s: building %s@%s into %s\n", b.Name, b.Module, b.Version, dir)
					return b.Make(ctx, tmp, log)
				}}.Run(ctx)
		}}
}

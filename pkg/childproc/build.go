package childproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// Build builds a binary into a cache directory once. See Run.
type Build struct {
	// Name prefixes messages and errors ("jaeger").
	Name string
	// Path is where the binary is cached.
	Path string
	// Lock is the lock file that serializes builds. Empty means
	// ".<Name>.lock" beside Path.
	Lock string
	// Log receives progress and the build's output. Nil means os.Stderr.
	Log io.Writer
	// Prune is a glob of older cached binaries, removed after a build
	// (Path is kept). Empty removes nothing.
	Prune string
	// Make builds the binary in tmp (an empty directory beside Path,
	// removed afterwards; Path's directory exists) and returns the path of
	// the binary it built, which Run moves to Path.
	Make func(ctx context.Context, tmp string, log io.Writer) (string, error)
}

// Run returns Path once it is an executable file: at once when it is;
// else, holding Lock (waiting, and honouring ctx, while another build, in
// this or another process, holds it), it builds it with Make unless a build
// that held the lock before made it meanwhile.
func (b Build) Run(ctx context.Context) (string, error) {
	if b.Log == nil {
		b.Log = os.Stderr
	}
	if b.Lock == "" {
		b.Lock = filepath.Join(filepath.Dir(b.Path), "."+b.Name+".lock")
	}
	if Executable(b.Path) == nil {
		return b.Path, nil
	}
	dir := filepath.Dir(b.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", b.Name, err)
	}
	unlock, err := LockFile(ctx, b.Lock)
	if err != nil {
		return "", fmt.Errorf("%s: %w", b.Name, err)
	}
	defer unlock()
	if Executable(b.Path) == nil {
		return b.Path, nil // built while we waited
	}
	tmp, err := os.MkdirTemp(dir, "."+b.Name+"-build-")
	if err != nil {
		return "", fmt.Errorf("%s: %w", b.Name, err)
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	built, err := b.Make(ctx, tmp, b.Log)
	if err != nil {
		return "", err
	}
	if err := Executable(built); err != nil {
		return "", fmt.Errorf("%s: the build produced no binary: %w", b.Name, err)
	}
	if err := os.Rename(built, b.Path); err != nil {
		return "", fmt.Errorf("%s: %w", b.Name, err)
	}
	if b.Prune != "" {
		old, _ := filepath.Glob(b.Prune)
		for _, p := range old {
			if p != b.Path {
				_ = os.Remove(p)
			}
		}
	}
	fmt.Fprintf(b.Log, "%s: installed %s in %s\n", b.Name, b.Path, time.Since(start).Round(time.Second))
	return b.Path, nil
}

// Executable reports why p is not an executable file (nil when it is).
func Executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// LockFile takes an exclusive flock on path (created if missing), waiting,
// and honouring ctx, while another holder (another process, or another
// LockFile in this one) has it. The returned function releases it; the
// kernel does if the process dies.
func LockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	fd := int(f.Fd())
	var tick *time.Ticker
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, errors.Join(fmt.Errorf("flock %s: %w", path, err), f.Close())
		}
		if tick == nil {
			tick = time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("waiting for %s: %w", path, ctx.Err()), f.Close())
		case <-tick.C:
		}
	}
	return func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		f.Close() //nolint:errcheck // a lock file, never written: closing it loses nothing
	}, nil
}

// GoTool returns the go command: on PATH, else the one of the running
// toolchain's GOROOT.
func GoTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	// runtime.GOROOT is deprecated for a binary copied elsewhere; this is the
	// fallback for the test binaries and `go run` programs built here, whose
	// GOROOT is the toolchain that built them (go env GOROOT needs go itself).
	p := filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // SA1019: see above
	if Executable(p) == nil {
		return p, nil
	}
	return "", errors.New("the go command is needed for the build and is not on PATH")
}

// GoCommand returns the go command (GoTool) with args, run in dir with env
// (nil: this process's), its output to log, and a WaitDelay so that a
// cancelled build does not wait on its output for ever.
func GoCommand(ctx context.Context, dir string, env []string, log io.Writer, args ...string) (*exec.Cmd, error) {
	goBin, err := GoTool()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 10 * time.Second
	return cmd, nil
}

// ModuleBuild builds a command of a Go module at a version as that module's
// own main module: the module is downloaded into the module cache (go mod
// download, through the module proxy as any module) and Package is built
// inside it, so its go.mod's replace and exclude directives apply — which
// `go install module/cmd@version` refuses — and this repository's workspace
// never does. Its Make is a Build's.
type ModuleBuild struct {
	Name    string // prefixes errors ("caddy")
	Module  string // the module path
	Version string
	Package string // the command, relative to the module's root ("./cmd/caddy")
	LDFlags string // -ldflags, or empty
}

// Make downloads and builds the command into tmp and returns its path.
func (m ModuleBuild) Make(ctx context.Context, tmp string, log io.Writer) (string, error) {
	src, err := m.download(ctx, tmp, log)
	if err != nil {
		return "", err
	}
	built := filepath.Join(tmp, m.Name)
	args := []string{"build", "-trimpath", "-o", built}
	if m.LDFlags != "" {
		args = append(args, "-ldflags", m.LDFlags)
	}
	cmd, err := GoCommand(ctx, src, moduleEnv(), log, append(args, m.Package)...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.Name, err)
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: go build %s in %s@%s: %w", m.Name, m.Package, m.Module, m.Version, err)
	}
	return built, nil
}

// download fetches Module@Version into the module cache and returns its
// directory there.
func (m ModuleBuild) download(ctx context.Context, workDir string, log io.Writer) (string, error) {
	// No go.mod in workDir: nothing but the module is resolved.
	cmd, err := GoCommand(ctx, workDir, moduleEnv(), log, "mod", "download", "-json", m.Module+"@"+m.Version)
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.Name, err)
	}
	cmd.Stdout = nil
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("%s: go mod download %s@%s: %s", m.Name, m.Module, m.Version, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("%s: go mod download %s@%s: %w", m.Name, m.Module, m.Version, err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("%s: go mod download %s@%s gave no directory", m.Name, m.Module, m.Version)
	}
	return mod.Dir, nil
}

// moduleEnv is the go command's environment for a ModuleBuild: out of any
// workspace, with the module's own go.mod and go.sum as they are.
func moduleEnv() []string {
	env := EnvWithout(func(k string) bool { return k == "GOWORK" || k == "GOFLAGS" || k == "GO111MODULE" })
	return append(env, "GOWORK=off", "GOFLAGS=-mod=readonly", "GO111MODULE=on")
}

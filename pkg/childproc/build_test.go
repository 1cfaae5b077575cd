package childproc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/childproc"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildOnceUnderTheLock: concurrent builds of one binary run Make once;
// while it runs the lock is held (another holder times out), and the others
// return the binary it made.
func TestBuildOnceUnderTheLock(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "bin") // Run creates it
	var makes atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	b := childproc.Build{
		Name: "tool", Path: filepath.Join(cache, "tool-v2"), Log: io.Discard,
		Make: func(ctx context.Context, tmp string, log io.Writer) (string, error) {
			if makes.Add(1) == 1 {
				close(entered)
			}
			<-release
			if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
				t.Errorf("tmp %s: %v %v, want an empty directory", tmp, entries, err)
			}
			return script(t, tmp, "built"), nil
		},
	}
	const builds = 6
	var wg sync.WaitGroup
	paths, errs := make([]string, builds), make([]error, builds)
	for i := range builds {
		wg.Go(func() { paths[i], errs[i] = b.Run(context.Background()) })
	}
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := childproc.LockFile(ctx, filepath.Join(cache, ".tool.lock"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockFile while a build runs = %v, want it to wait until its deadline", err)
	}
	close(release)
	wg.Wait()
	for i := range builds {
		if errs[i] != nil || paths[i] != b.Path {
			t.Errorf("build %d = %q, %v; want %s", i, paths[i], errs[i], b.Path)
		}
	}
	if n := makes.Load(); n != 1 {
		t.Fatalf("Make ran %d times, want once", n)
	}
	if err := childproc.Executable(b.Path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if e.Name() != "tool-v2" && e.Name() != ".tool.lock" {
			t.Errorf("left in the cache: %s", e.Name())
		}
	}
	// Built: Run returns it without the lock.
	unlock, err := childproc.LockFile(context.Background(), filepath.Join(cache, ".tool.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if p, err := b.Run(context.Background()); err != nil || p != b.Path || makes.Load() != 1 {
		t.Fatalf("Run with the binary there = %q, %v (makes %d)", p, err, makes.Load())
	}
}

// TestBuildPrunesOldVersionsAndReportsFailures.
func TestBuildPrunesOldVersionsAndReportsFailures(t *testing.T) {
	cache := t.TempDir()
	old := script(t, cache, "tool-v1")
	other := script(t, cache, "other-v1")
	var log bytes.Buffer
	b := childproc.Build{
		Name: "tool", Path: filepath.Join(cache, "tool-v2"), Log: &log, Prune: filepath.Join(cache, "tool-v*"),
		Make: func(ctx context.Context, tmp string, log io.Writer) (string, error) {
			return "", errors.New("tool: compile error")
		},
	}
	if _, err := b.Run(context.Background()); err == nil || err.Error() != "tool: compile error" {
		t.Fatalf("Run = %v, want Make's error", err)
	}
	b.Make = func(ctx context.Context, tmp string, log io.Writer) (string, error) {
		p := filepath.Join(tmp, "not-executable")
		return p, os.WriteFile(p, nil, 0o644)
	}
	if _, err := b.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "tool: the build produced no binary") {
		t.Fatalf("Run = %v, want no binary", err)
	}
	if childproc.Executable(b.Path) == nil || childproc.Executable(old) != nil {
		t.Fatal("a failed build changed the cache")
	}
	b.Make = func(ctx context.Context, tmp string, log io.Writer) (string, error) {
		return script(t, tmp, "tool"), nil
	}
	if p, err := b.Run(context.Background()); err != nil || p != b.Path {
		t.Fatalf("Run = %q, %v", p, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old version is still there: %v", err)
	}
	if childproc.Executable(other) != nil || childproc.Executable(b.Path) != nil {
		t.Error("the prune removed more than the old versions")
	}
	if !strings.Contains(log.String(), "tool: installed "+b.Path) {
		t.Errorf("log: %q", log.String())
	}
}

// TestLockHeldByAnotherProcess: a lock another process holds makes
// LockFile and Build.Run wait (until their context ends); the kernel frees
// it when that process dies.
func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	lock, ready := filepath.Join(dir, ".tool.lock"), filepath.Join(dir, "ready")
	o := helperOpts(t, "lock", lock, ready)
	o.Ready = fileReady(ready)
	holder := start(t, o)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	b := childproc.Build{
		Name: "tool", Path: filepath.Join(dir, "tool"), Log: io.Discard,
		Make: func(ctx context.Context, tmp string, log io.Writer) (string, error) {
			return script(t, tmp, "tool"), nil
		},
	}
	if _, err := b.Run(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "tool: waiting for "+lock) {
		t.Fatalf("Run while another process holds the lock = %v, want it to wait until its deadline", err)
	}
	if err := holder.Stop(childproc.Step{Signal: syscall.SIGKILL}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p, err := b.Run(ctx); err != nil || p != b.Path {
		t.Fatalf("Run after the holder died = %q, %v", p, err)
	}
}

func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	if err := childproc.Executable(dir); err == nil {
		t.Error("a directory is executable")
	}
	if err := childproc.Executable(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	if err := childproc.Executable(script(t, dir, "x")); err != nil {
		t.Error(err)
	}
}

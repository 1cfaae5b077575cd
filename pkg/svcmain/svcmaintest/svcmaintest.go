// Package svcmaintest runs a service binary the way a container runtime
// does, for the drain tests: build it, start it, send it SIGTERM, and read
// its exit code.
package svcmaintest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Build builds the package pkg (e.g. "./cmd/llm", relative to the test's
// directory) into the test's temporary directory and returns the binary's
// path (the build cache makes a second build cheap).
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Proc is a running service binary.
type Proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start runs bin with the test's environment plus env ("NAME=value").
// Its output goes to the test's stderr. Cleanup kills it if it still runs.
func Start(t testing.TB, bin string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// Signal sends sig (syscall.SIGTERM, say) to the process.
func (p *Proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Wait waits up to limit for the process to exit and returns its exit
// code; the test fails (and the process is killed) beyond limit.
func (p *Proc) Wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(limit):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, to see what it waited for
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		p.t.Fatalf("%s did not exit within %v of the signal", filepath.Base(p.cmd.Path), limit)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	default:
		p.t.Fatal(fmt.Errorf("wait: %w", p.err))
		return -1
	}
}

// Stop sends SIGTERM and asserts that the process exits 0 within limit.
func (p *Proc) Stop(limit time.Duration) {
	p.t.Helper()
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(limit); code != 0 {
		p.t.Fatalf("%s exited %d after SIGTERM, want 0", filepath.Base(p.cmd.Path), code)
	}
}

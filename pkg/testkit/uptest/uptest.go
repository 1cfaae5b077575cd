// Package uptest runs the alicia command as a user does, for the tests
// that start `alicia up` as a process: built with go build, its
// environment without the test's ALICIA_* settings, its banner read.
package uptest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// Build builds the alicia command into a temporary directory.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "alicia")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/alicia-voice/alicia/services/cli/cmd/alicia").CombinedOutput()
	if err != nil {
		t.Fatalf("go build alicia: %v\n%s", err, out)
	}
	return bin
}

// UserEnv is this process's environment without any ALICIA_* setting,
// plus env.
func UserEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ALICIA_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// Field returns the first word after label in out (a banner line's value).
func Field(out, label string) string {
	_, rest, ok := strings.Cut(out, label)
	if !ok {
		return ""
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// BannerEnd is the last line of up's banner.
const BannerEnd = "Ctrl-C stops."

// Up is a running `alicia up`.
type Up struct {
	// Out is its standard output (the banner), Log its standard error.
	Out, Log *testkit.SyncBuffer
	// Started is when it was started; UpAfter how long until its whole
	// banner was printed (up to "Ctrl-C stops."), and HTTPSAfter until its
	// HTTPS line.
	Started             time.Time
	UpAfter, HTTPSAfter time.Duration
	cmd                 *exec.Cmd
	exited              chan error
	done                bool
}

// Start runs bin with args (["up"], ["up", "--traces"]) in env and waits up
// to 3 minutes for its whole banner: "Alicia is up" opens it, and it is
// written in several parts, so the test waits for its last line, "Ctrl-C
// stops.". A test that ends with it still running
// kills it; a failed one logs its output.
func Start(t *testing.T, bin string, env []string, args ...string) *Up {
	t.Helper()
	u := &Up{Out: &testkit.SyncBuffer{}, Log: &testkit.SyncBuffer{}, exited: make(chan error, 1)}
	u.cmd = exec.Command(bin, args...)
	u.cmd.Env, u.cmd.Stdout, u.cmd.Stderr = env, u.Out, u.Log
	u.Started = time.Now()
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { u.exited <- u.cmd.Wait() }()
	t.Cleanup(func() {
		if !u.done {
			_ = u.cmd.Process.Kill()
			<-u.exited //nolint:errcheck // "signal: killed", the kill above
			u.done = true
		}
		if t.Failed() {
			t.Logf("alicia up's output:\n%s\nits log (the last part):\n%s", u.Out.String(), tail(u.Log.String(), 16000))
		}
	})
	err := testkit.CheckFor(3*time.Minute, testkit.PollInterval, func() error {
		select {
		case err := <-u.exited:
			u.done = true
			t.Fatalf("alicia up exited before it was up: %v", err)
		default:
		}
		out := u.Out.String()
		if u.HTTPSAfter == 0 && strings.Contains(out, "HTTPS:") {
			u.HTTPSAfter = time.Since(u.Started)
		}
		if !strings.Contains(out, "Alicia is up") || !strings.Contains(out, BannerEnd) {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err != nil {
		t.Fatal("alicia up did not print its banner (\"Alicia is up\" … \"Ctrl-C stops.\")")
	}
	u.UpAfter = time.Since(u.Started)
	return u
}

// Field is Field of the banner.
func (u *Up) Field(label string) string { return Field(u.Out.String(), label) }

// Stop sends Ctrl-C's SIGINT and fails t unless up exits cleanly within 45
// seconds (Jaeger included), having printed "Alicia stopped".
func (u *Up) Stop(t *testing.T) {
	t.Helper()
	if err := u.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-u.exited:
		u.done = true
		if err != nil {
			t.Fatalf("alicia up after Ctrl-C: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("alicia up did not stop")
	}
	if !strings.Contains(u.Out.String(), "Alicia stopped") {
		t.Fatalf("output = %q", u.Out.String())
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

package svcmain_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The drain tests run Serve in a copy of the test binary (TestMain sends it
// to drainService) and signal that process as a container runtime would.
const drainChild = "SVCMAIN_DRAIN_CHILD"

// drainService is a service whose one piece of work, taken at start, takes
// as long as mode says: it reports on stdout when the run context ends
// ("draining"), when the work context ends ("forced") and when the work is
// done ("done").
func drainService(mode string) int {
	return svcmain.Serve("drain-test", func() (config, error) { return config{}, nil }, func(ctx context.Context, _ config, _ zerolog.Logger) error {
		work := svcmain.WorkContext(ctx)
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("draining")
		if svcmain.Draining(ctx).Check(context.Background()) == nil {
			return errors.New("the drain health check passes while draining")
		}
		switch mode {
		case "quick":
			time.Sleep(200 * time.Millisecond)
			fmt.Println("done")
			return nil
		case "stuck":
			<-work.Done()
			fmt.Println("forced")
			return nil
		default:
			return errors.New("unknown mode " + mode)
		}
	})
}

type childProc struct {
	cmd  *exec.Cmd
	out  *testkit.SyncBuffer
	exit chan error
}

func startChild(t *testing.T, mode string, env ...string) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), drainChild+"="+mode, "ALICIA_LOG_LEVEL=warn"), env...)
	c := &childProc{cmd: cmd, out: &testkit.SyncBuffer{}, exit: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.out, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exit <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	c.await(t, "ready")
	return c
}

// await waits until the child printed line.
func (c *childProc) await(t *testing.T, line string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(c.out.String(), line+"\n") }, "the child never printed "+line)
}

func (c *childProc) wait(t *testing.T, limit time.Duration) (int, string) {
	t.Helper()
	select {
	case err := <-c.exit:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), c.out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, c.out.String()
	case <-time.After(limit):
		t.Fatalf("the child did not exit within %v", limit)
		return -1, ""
	}
}

func TestDrainFinishesAndExitsZero(t *testing.T) {
	c := startChild(t, "quick")
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	code, out := c.wait(t, 30*time.Second)
	if code != 0 || !strings.Contains(out, "draining\ndone") {
		t.Fatalf("exit %d, output %q; want 0 after draining and done", code, out)
	}
}

func TestDrainDeadlineForcesTheStop(t *testing.T) {
	c := startChild(t, "stuck", "ALICIA_SHUTDOWN_TIMEOUT=500ms")
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	code, out := c.wait(t, 30*time.Second)
	if code != svcmain.ExitForced || !strings.Contains(out, "draining\nforced") {
		t.Fatalf("exit %d, output %q; want %d after the work context ended", code, out, svcmain.ExitForced)
	}
}

func TestDrainSecondSignalForcesTheStop(t *testing.T) {
	c := startChild(t, "stuck", "ALICIA_SHUTDOWN_TIMEOUT=10m")
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	c.await(t, "draining") // the second signal must come after the first was taken
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	code, out := c.wait(t, 30*time.Second)
	if code != svcmain.ExitForced || !strings.Contains(out, "forced") {
		t.Fatalf("exit %d, output %q; want %d", code, out, svcmain.ExitForced)
	}
}

func TestShutdownTimeoutFromEnv(t *testing.T) {
	t.Setenv("ALICIA_SHUTDOWN_TIMEOUT", "")
	if d, err := svcmain.ShutdownTimeoutFromEnv(); err != nil || d != svcmain.DefaultShutdownTimeout {
		t.Errorf("unset: %v, %v", d, err)
	}
	t.Setenv("ALICIA_SHUTDOWN_TIMEOUT", "-1s")
	if _, err := svcmain.ShutdownTimeoutFromEnv(); err == nil {
		t.Error("a negative timeout is accepted")
	}
	t.Setenv("ALICIA_SHUTDOWN_TIMEOUT", "soon")
	if code := svcmain.Serve("x", func() (config, error) { return config{}, nil }, func(context.Context, config, zerolog.Logger) error { return nil }); code != svcmain.ExitConfig {
		t.Errorf("ALICIA_SHUTDOWN_TIMEOUT=soon: exit %d, want %d", code, svcmain.ExitConfig)
	}
}

func TestWorkContextOutsideServeEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	work := svcmain.WorkContext(ctx)
	cancel()
	select {
	case <-work.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the work context outlives a context that does not come from Serve")
	}
}

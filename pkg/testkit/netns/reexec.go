package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/localpg"
)

// reexec runs this test binary again in a new network namespace and returns
// its exit code. An error means the child could not be started (no
// namespace): the caller runs the tests itself.
func reexec() (int, error) {
	env := append(os.Environ(), envInside+"=1")
	pg, stopRelay := postgresForChild()
	defer stopRelay()
	if pg != "" {
		env = append(env, localpg.EnvURL+"="+pg)
	}
	// Pdeathsig is delivered when the thread that started the child ends:
	// keep this goroutine on its thread until the child has exited.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var lastErr error
	for _, attrs := range namespaceAttrs() {
		cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
		cmd.Args[0] = os.Args[0]
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.SysProcAttr = attrs
		if err := cmd.Start(); err != nil {
			lastErr = err
			continue
		}
		return wait(cmd), nil
	}
	return 0, fmt.Errorf("cannot create a network namespace: %w", lastErr)
}

// namespaceAttrs are the ways to start the child, tried in order: a new
// network namespace (needs CAP_SYS_ADMIN, i.e. root), then a new user
// namespace mapping this user to root with a network namespace inside it.
func namespaceAttrs() []*syscall.SysProcAttr {
	var out []*syscall.SysProcAttr
	if os.Geteuid() == 0 {
		out = append(out, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL})
	}
	out = append(out, &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
	})
	return out
}

// wait forwards signals to the child until it exits and returns its exit
// code (128+signal when a signal ended it).
func wait(cmd *exec.Cmd) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "netns: waiting for the test process: %v\n", err)
		return 1
	}
}

package childproc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/childproc"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The test binary is also the child the tests run: with envHelper set,
// TestMain runs helper(mode) instead of the tests.
const envHelper = "CHILDPROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		helper(mode, os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper is the child process:
//
//	crash N [PIDFILE]: prints N lines to stdout, "fatal: boom" to stderr,
//	  writes its pid to PIDFILE, exits 3
//	boot PIDFILE: prints "still booting", writes its pid to PIDFILE and
//	  never gets ready
//	serve READY [ignore-term] [grandchild PIDFILE] [print N]: prints N lines,
//	  writes its pid to READY (atomically), prints "after ready"; on SIGTERM
//	  prints "stopping" and exits 0, or with ignore-term prints
//	  "ignoring SIGTERM" and runs on; grandchild first starts a child of its
//	  own (block, with the same stdout) and writes that one's pid to PIDFILE
//	block: blocks until SIGTERM
//	lock PATH READY: holds childproc.LockFile(PATH), then writes READY and blocks
func helper(mode string, args []string) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM)
	block := func() {
		for range sigs {
			os.Exit(0)
		}
	}
	switch mode {
	case "crash":
		n, _ := strconv.Atoi(args[0])
		for i := range n {
			fmt.Printf("line %d\n", i)
		}
		fmt.Fprintln(os.Stderr, "fatal: boom")
		if len(args) > 1 {
			writeAtomically(args[1], strconv.Itoa(os.Getpid()))
		}
		os.Exit(3)
	case "boot":
		fmt.Println("still booting")
		writeAtomically(args[0], strconv.Itoa(os.Getpid()))
		block()
	case "block":
		block()
	case "lock":
		if _, err := childproc.LockFile(context.Background(), args[0]); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		writeAtomically(args[1], strconv.Itoa(os.Getpid()))
		block()
	case "serve":
		ready, ignoreTerm, lines := args[0], false, 0
		for i := 1; i < len(args); i++ {
			switch args[i] {
			case "ignore-term":
				ignoreTerm = true
			case "print":
				i++
				lines, _ = strconv.Atoi(args[i])
			case "grandchild":
				i++
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), envHelper+"=block")
				cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
				if err := cmd.Start(); err != nil {
					fmt.Println(err)
					os.Exit(2)
				}
				writeAtomically(args[i], strconv.Itoa(cmd.Process.Pid))
			}
		}
		for i := range lines {
			fmt.Printf("line %d\n", i)
		}
		writeAtomically(ready, strconv.Itoa(os.Getpid()))
		fmt.Println("after ready")
		for range sigs {
			if !ignoreTerm {
				fmt.Println("stopping")
				os.Exit(0)
			}
			fmt.Println("ignoring SIGTERM")
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		os.Exit(2)
	}
}

func writeAtomically(path, content string) {
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		panic(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		panic(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// fileReady is a readiness check: path exists.
func fileReady(path string) func(context.Context) error {
	return func(context.Context) error {
		if exists(path) {
			return nil
		}
		return fmt.Errorf("%s not there yet", path)
	}
}

// helperOpts runs this test binary as helper mode with args.
func helperOpts(t *testing.T, mode string, args ...string) childproc.Options {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return childproc.Options{
		Name: "helper", Path: self, Args: args, Dir: t.TempDir(),
		// GORACE: a -race child would otherwise wait a second at exit.
		Env:          append(os.Environ(), envHelper+"="+mode, "GORACE=atexit_sleep_ms=0"),
		ReadyTimeout: 30 * time.Second,
	}
}

// start starts a serve helper and waits until it is ready; the returned
// process is killed at the end of the test.
func start(t *testing.T, o childproc.Options) *childproc.Process {
	t.Helper()
	p, err := childproc.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// gone reports whether no process pid exists (an ended child of ours has
// been reaped by the time Done is closed).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestExitBeforeReadyReportsTheOutputTail: a child that dies before it is
// ready fails Start with Options.Exited, its exit status and the end of
// its output (stdout and stderr), no more than TailBytes of it.
func TestExitBeforeReadyReportsTheOutputTail(t *testing.T) {
	errServer := errors.New("server exited")
	o := helperOpts(t, "crash", "5000")
	o.Ready = func(context.Context) error { return errors.New("no") }
	o.Exited = errServer
	o.TailBytes = 1024
	_, err := childproc.Start(context.Background(), o)
	if !errors.Is(err, errServer) {
		t.Fatalf("Start = %v, want %v", err, errServer)
	}
	msg := err.Error()
	for _, want := range []string{"exit status 3", "line 4999\n", "fatal: boom"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 0\n") || len(msg) > 1024+200 {
		t.Errorf("error holds more than the 1 KiB tail (%d bytes):\n%.300s", len(msg), msg)
	}
	// Without Exited: ErrExited.
	o.Exited = nil
	if _, err := childproc.Start(context.Background(), o); !errors.Is(err, childproc.ErrExited) {
		t.Fatalf("Start = %v, want ErrExited", err)
	}
}

// TestExitDuringASlowCheck: a child that exits while a readiness check
// takes longer than PollInterval (a dial that times out) is reported once
// that check returns, without another check.
func TestExitDuringASlowCheck(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	o := helperOpts(t, "crash", "1", pidFile)
	o.PollInterval = time.Millisecond
	checks := 0
	o.Ready = func(context.Context) error {
		checks++
		testkit.Eventually(t, 10*time.Second, func() bool {
			return exists(pidFile) && gone(readPID(t, pidFile))
		}, "the child exited")
		return errors.New("no answer")
	}
	if _, err := childproc.Start(context.Background(), o); !errors.Is(err, childproc.ErrExited) || checks != 1 {
		t.Fatalf("Start = %v after %d checks, want ErrExited after one", err, checks)
	}
}

// TestNotReadyInTimeIsKilled: a child that is not ready in time fails Start
// with the readiness check's last error and its output, and is killed.
func TestNotReadyInTimeIsKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	o := helperOpts(t, "boot", pidFile)
	o.Ready = func(context.Context) error { return errors.New("the port is closed") }
	o.ReadyTimeout = 300 * time.Millisecond
	o.PollInterval = 10 * time.Millisecond
	began := time.Now()
	_, err := childproc.Start(context.Background(), o)
	if err == nil || errors.Is(err, childproc.ErrExited) {
		t.Fatalf("Start = %v, want a readiness timeout", err)
	}
	if took := time.Since(began); took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("Start returned after %s, want about 300ms", took)
	}
	for _, want := range []string{"helper: not ready within 300ms", "the port is closed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// The child may not have printed before the deadline on a very busy
	// machine; once it has written its pid, it has.
	if exists(pidFile) {
		if !strings.Contains(err.Error(), "still booting") {
			t.Errorf("error lacks the output: %v", err)
		}
		if pid := readPID(t, pidFile); !gone(pid) {
			t.Errorf("child %d still exists after the failed Start", pid)
		}
	}
}

// TestStopKillsAChildIgnoringSIGTERM: Stop signals, waits the step's
// deadline, then kills a child that ignores SIGTERM.
func TestStopKillsAChildIgnoringSIGTERM(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	o := helperOpts(t, "serve", ready, "ignore-term")
	o.Ready = fileReady(ready)
	p := start(t, o)
	pid := readPID(t, ready)
	if pid != p.PID() {
		t.Fatalf("PID %d, the child says %d", p.PID(), pid)
	}
	const deadline = 400 * time.Millisecond
	began := time.Now()
	if err := p.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: deadline}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if took < deadline || took > 4*time.Second {
		t.Errorf("Stop took %s, want the %s deadline and a kill", took, deadline)
	}
	exited, err := p.Exited()
	var exitErr *exec.ExitError
	if !exited || !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Exited = %v, %v; want killed by SIGKILL", exited, err)
	}
	if !strings.Contains(p.Output(), "ignoring SIGTERM") {
		t.Errorf("the child got no SIGTERM before the kill; output:\n%s", p.Output())
	}
	if !gone(pid) {
		t.Errorf("child %d still exists", pid)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := p.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: time.Hour}); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestStopEndsAChildThatHonoursSIGTERM without waiting for the deadline.
func TestStopEndsAChildThatHonoursSIGTERM(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	o := helperOpts(t, "serve", ready)
	o.Ready = fileReady(ready)
	p := start(t, o)
	began := time.Now()
	if err := p.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("Stop took %s", took)
	}
	if exited, err := p.Exited(); !exited || err != nil {
		t.Fatalf("Exited = %v, %v; want a clean exit", exited, err)
	}
	if out := p.Output(); !strings.Contains(out, "stopping") {
		t.Errorf("output:\n%s", out)
	}
}

// TestKillEndsTheProcessGroup: the kill reaches what the child started (a
// grandchild holding the output pipe), so Stop neither leaves it behind nor
// waits for the pipe to close.
func TestKillEndsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	ready, grandchild := filepath.Join(dir, "ready"), filepath.Join(dir, "grandchild")
	o := helperOpts(t, "serve", ready, "ignore-term", "grandchild", grandchild)
	o.Ready = fileReady(ready)
	p := start(t, o)
	gpid := readPID(t, grandchild)
	if gone(gpid) {
		t.Fatalf("grandchild %d is not running", gpid)
	}
	began := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("Stop took %s: it waited for the grandchild's pipe", took)
	}
	// The grandchild is init's child now: its zombie goes once reaped.
	testkit.Eventually(t, 10*time.Second, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", gpid))
		return err != nil || strings.Contains(string(st), ") Z ")
	}, "grandchild %d ended", gpid)
}

// TestLogWriterAndFile: the output goes to Log, and a Log that fails does
// not end the child; without Log it is appended to LogPath.
func TestLogWriterAndFile(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	o := helperOpts(t, "serve", ready, "print", "200")
	o.Ready = fileReady(ready)
	o.Log = failingWriter{}
	p := start(t, o)
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(p.Output(), "after ready") }, "output after ready")
	if exited, err := p.Exited(); exited || !strings.Contains(p.Output(), "line 199\n") {
		t.Fatalf("with a failing log: exited %v (%v), output:\n%s", exited, err, p.Output())
	}
	if err := p.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if exited, err := p.Exited(); !exited || err != nil {
		t.Fatalf("Exited = %v, %v; want a clean exit (no SIGPIPE)", exited, err)
	}

	logPath := filepath.Join(dir, "child.log")
	if err := os.WriteFile(logPath, []byte("earlier run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ready2 := filepath.Join(dir, "ready2")
	o = helperOpts(t, "serve", ready2, "print", "3")
	o.Ready, o.LogPath = fileReady(ready2), logPath
	p = start(t, o)
	if err := p.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "earlier run\nline 0\nline 1\nline 2\nafter ready\nstopping\n"; string(b) != want {
		t.Fatalf("log file %q, want %q", b, want)
	}
	if fi, err := os.Stat(logPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode: %v %v", fi, err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestStartMissingBinary names the binary.
func TestStartMissingBinary(t *testing.T) {
	_, err := childproc.Start(context.Background(), childproc.Options{Name: "x", Path: "/nonexistent/server"})
	if err == nil || !strings.Contains(err.Error(), "x: start /nonexistent/server") {
		t.Fatalf("Start = %v", err)
	}
}

// TestHTTPChecks: HTTPAnswers accepts any status, HTTPOK only 200.
func TestHTTPChecks(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	ctx := context.Background()
	if err := childproc.HTTPAnswers(srv.URL)(ctx); err != nil {
		t.Fatalf("HTTPAnswers on 503: %v", err)
	}
	if err := childproc.HTTPOK(srv.URL)(ctx); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("HTTPOK on 503 = %v, want an error naming 503", err)
	}
	status = http.StatusOK
	if err := childproc.HTTPOK(srv.URL)(ctx); err != nil {
		t.Fatalf("HTTPOK on 200: %v", err)
	}
	srv.Close()
	if err := childproc.HTTPAnswers(srv.URL)(ctx); err == nil {
		t.Fatal("HTTPAnswers on a closed server: nil")
	}
}

func TestEnvWithoutAndWorkDir(t *testing.T) {
	t.Setenv("CHILDPROC_TEST_DROP", "1")
	t.Setenv("CHILDPROC_TEST_KEEP", "1")
	env := strings.Join(childproc.EnvWithout(func(k string) bool { return k == "CHILDPROC_TEST_DROP" }), "\n")
	if strings.Contains(env, "CHILDPROC_TEST_DROP=") || !strings.Contains(env, "CHILDPROC_TEST_KEEP=1") {
		t.Fatalf("env:\n%s", env)
	}

	given := filepath.Join(t.TempDir(), "a", "b")
	dir, temp, err := childproc.WorkDir(given, "x-")
	if err != nil || dir != given || temp != "" {
		t.Fatalf("WorkDir(%s) = %q, %q, %v", given, dir, temp, err)
	}
	if fi, err := os.Stat(given); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("WorkDir made %v %v", fi, err)
	}
	dir, temp, err = childproc.WorkDir("", "childproc-test-")
	if err != nil || dir != temp || !strings.HasPrefix(filepath.Base(dir), "childproc-test-") {
		t.Fatalf("WorkDir(\"\") = %q, %q, %v", dir, temp, err)
	}
	os.RemoveAll(temp)
}

// TestStartInRetriesATakenPort: StartIn tries again, in the same
// directory, while the child exits with "address already in use" (and no
// more than attempts times); any other failure ends it at once. A
// temporary directory is removed when no attempt succeeded, and by Stop of
// the child that was handed it.
func TestStartInRetriesATakenPort(t *testing.T) {
	errServer := errors.New("server exited")
	inUse := fmt.Errorf("%w: listen tcp 127.0.0.1:80: bind: address already in use", errServer)
	var dirs []string
	_, err := childproc.StartIn(context.Background(), "srv", "", "childproc-test-", 3, errServer, func(dir, temp string) (int, error) {
		if dir != temp || !exists(dir) {
			t.Errorf("dir %q, temp %q", dir, temp)
		}
		dirs = append(dirs, dir)
		return 0, inUse
	})
	if err != inUse || len(dirs) != 3 || dirs[0] != dirs[1] || dirs[1] != dirs[2] {
		t.Fatalf("StartIn = %v after %d attempts in %v, want the last error after 3 in one directory", err, len(dirs), dirs)
	}
	if exists(dirs[0]) {
		t.Errorf("temporary directory %s left behind", dirs[0])
	}

	other := fmt.Errorf("%w: bad config", errServer)
	attempts := 0
	_, err = childproc.StartIn(context.Background(), "srv", t.TempDir(), "", 3, errServer, func(dir, temp string) (int, error) {
		attempts++
		if temp != "" {
			t.Errorf("temp %q for a given directory", temp)
		}
		return 0, other
	})
	if err != other || attempts != 1 {
		t.Fatalf("StartIn = %v after %d attempts, want the error after one", err, attempts)
	}
	attempts = 0
	_, err = childproc.StartIn(context.Background(), "srv", t.TempDir(), "", 1, errServer, func(dir, temp string) (int, error) {
		attempts++
		return 0, inUse
	})
	if err != inUse || attempts != 1 {
		t.Fatalf("StartIn with one attempt = %v after %d", err, attempts)
	}

	// Success on the second attempt: the child owns the directory, which
	// its Stop removes (once: a second Stop does nothing).
	attempts = 0
	var dir string
	p, err := childproc.StartIn(context.Background(), "srv", "", "childproc-test-", 3, errServer, func(d, temp string) (*childproc.Process, error) {
		if attempts++; attempts == 1 {
			return nil, inUse
		}
		dir = d
		ready := filepath.Join(dir, "ready")
		o := helperOpts(t, "serve", ready)
		o.Ready, o.RemoveDir = fileReady(ready), temp
		return childproc.Start(context.Background(), o)
	})
	if err != nil || attempts != 2 {
		t.Fatalf("StartIn = %v after %d attempts", err, attempts)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if !exists(dir) {
		t.Fatalf("directory %s gone while the child runs", dir)
	}
	if err := p.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if exists(dir) {
		t.Errorf("directory %s left behind by Stop", dir)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestFindOrBuild(t *testing.T) {
	errMissing := errors.New("not installed")
	builds := 0
	build := func() (string, error) { builds++; return "/built", nil }
	tests := []struct {
		name      string
		findErr   error
		want      string
		wantErr   bool
		wantBuild int
	}{
		{"found", nil, "/found", false, 0},
		{"not installed", fmt.Errorf("x: %w", errMissing), "/built", false, 1},
		{"other error", errors.New("not executable"), "", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			builds = 0
			find := func() (string, error) {
				if tt.findErr != nil {
					return "", tt.findErr
				}
				return "/found", nil
			}
			got, err := childproc.FindOrBuild(find, errMissing, build)
			if got != tt.want || (err != nil) != tt.wantErr || builds != tt.wantBuild {
				t.Fatalf("FindOrBuild = %q, %v (builds %d)", got, err, builds)
			}
		})
	}
}

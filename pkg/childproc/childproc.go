// Package childproc runs the helper servers Alicia starts as child processes
// (livekit-server, Jaeger) and builds their Go binaries into a cache.
//
// Start runs a binary with its output copied to a log (a writer or a file)
// while the last bytes of it are kept for error messages, and returns once a
// readiness check passes; a process that exits first, or is not ready in
// time, is reported with that tail of its output. The child runs in a
// process group of its own (a terminal's ^C reaches the parent only, which
// stops it in order) and is killed if the thread that started it, and so the
// parent, dies (Pdeathsig). Stop sends the signals given, waiting after each,
// then kills the process group.
//
// Build.Run builds a binary into a cache directory under a file lock (LockFile):
// concurrent builds, in other processes too, wait for each other, and one
// that finds the binary already there returns it without building.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrExited is wrapped in the error of a process that ended before it was
// ready, unless Options.Exited names another error.
var ErrExited = errors.New("childproc: process exited")

// DefaultTailBytes is how much of the output a Process keeps by default.
const DefaultTailBytes = 16 << 10

// Options configure Start.
type Options struct {
	// Name prefixes error messages ("jaeger").
	Name string
	// Path is the binary, Args its arguments, Dir its working directory.
	Path string
	Args []string
	Dir  string
	// Config, unless nil, is written to ConfigPath (mode 0600: it may
	// hold secrets) before the child starts.
	Config     []byte
	ConfigPath string
	// Env is the child's environment. Nil means this process's.
	Env []string
	// Log receives the child's output (stdout and stderr). Nil means the
	// file LogPath (appended to, created with mode 0600); both empty means
	// the output is only kept in the tail. A Log that fails does not end the
	// child: the error is ignored and its output pipe stays open.
	Log     io.Writer
	LogPath string
	// TailBytes is how much of the last output is kept for Output and for
	// errors. Zero means DefaultTailBytes.
	TailBytes int
	// Ready reports whether the child is ready (nil) or why not. Start
	// calls it every PollInterval (zero: 50 ms) until it returns nil, the
	// child exits or ReadyTimeout (zero: 30 s) passes. Nil means the child
	// is ready once started.
	Ready        func(ctx context.Context) error
	PollInterval time.Duration
	ReadyTimeout time.Duration
	// Exited is wrapped in the error of a child that ended before it was
	// ready. Nil means ErrExited.
	Exited error
	// RemoveDir is a directory Stop removes once the child has ended (a
	// temporary one of StartIn, say). Empty removes nothing.
	RemoveDir string
}

// Process is a running child process.
type Process struct {
	name      string
	cmd       *exec.Cmd
	done      chan struct{}
	waitErr   error
	logErr    error // closing Options.LogPath's file, reported by Stop
	tail      *Tail
	removeDir string
	stopOnce  sync.Once
	stopErr   error
}

// Start runs the child and waits until it is ready (see Options). ctx bounds
// the wait only: Stop ends the child. On error the child has ended.
func Start(ctx context.Context, o Options) (*Process, error) {
	if o.TailBytes <= 0 {
		o.TailBytes = DefaultTailBytes
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	if o.Exited == nil {
		o.Exited = ErrExited
	}
	if o.Config != nil {
		if err := os.WriteFile(o.ConfigPath, o.Config, 0o600); err != nil {
			return nil, fmt.Errorf("%s: config: %w", o.Name, err)
		}
	}
	p := &Process{name: o.Name, done: make(chan struct{}), tail: NewTail(o.TailBytes), removeDir: o.RemoveDir}
	out := o.Log
	var logFile *os.File
	if out == nil && o.LogPath != "" {
		var err error
		if logFile, err = os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("%s: log: %w", o.Name, err)
		}
		out = logFile
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Env = o.Env
	cmd.Dir = o.Dir
	// The output reaches us through a pipe; a log writer that fails must
	// not close it (the child would die of SIGPIPE).
	cmd.Stdout = teeWriter{w: out, tail: p.tail}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Output pipes a grandchild holds open do not delay Wait for long.
	cmd.WaitDelay = 5 * time.Second
	p.cmd = cmd

	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child exits:
		// keep this goroutine on its thread until the child has ended.
		runtime.LockOSThread()
		// The log file is closed before done closes: Stop reads logErr.
		closeLog := func() {
			if logFile == nil {
				return
			}
			if err := logFile.Close(); err != nil {
				p.logErr = fmt.Errorf("%s: log: %w", o.Name, err)
			}
		}
		if err := cmd.Start(); err != nil {
			closeLog()
			started <- errors.Join(err, p.logErr)
			close(p.done)
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		closeLog()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", o.Name, o.Path, err)
	}
	if o.Ready == nil {
		return p, nil
	}
	if err := p.waitReady(ctx, o); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return p, nil
}

// waitReady polls o.Ready until it passes, the child exits or
// o.ReadyTimeout passes.
func (p *Process) waitReady(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	// The pause starts after each check (which may take a while, a dial
	// that times out say), so that an exit or the deadline during the
	// check wins over the next check.
	pause := time.NewTimer(o.PollInterval)
	defer pause.Stop()
	for {
		last := o.Ready(ctx)
		if last == nil {
			return nil
		}
		pause.Reset(o.PollInterval)
		select {
		case <-p.done:
			return fmt.Errorf("%w before it was ready (%v); output:\n%s", o.Exited, p.waitErr, p.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready within %s: %w; output:\n%s", o.Name, o.ReadyTimeout, last, p.tail.String())
		case <-pause.C:
		}
	}
}

// HTTPAnswers is a readiness check: a GET of url gets an answer, whatever
// its status.
func HTTPAnswers(url string) func(context.Context) error {
	return httpCheck(url, nil)
}

// HTTPOK is a readiness check: a GET of url answers 200 OK.
func HTTPOK(url string) func(context.Context) error {
	return httpCheck(url, func(code int) bool { return code == http.StatusOK })
}

func httpCheck(url string, ok func(int) bool) func(context.Context) error {
	client := &http.Client{Timeout: time.Second}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if ok != nil && !ok(resp.StatusCode) {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output returns the last output the process printed (Options.TailBytes).
func (p *Process) Output() string { return p.tail.String() }

// Exited reports whether the process has ended and, if so, why: the error
// of its wait (nil for a zero exit status).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Step is one step of Stop: send Signal, then wait up to Wait for the
// process to end.
type Step struct {
	Signal syscall.Signal
	Wait   time.Duration
}

// Stop ends the process: each step's signal in turn while it runs, then
// SIGKILL to its process group. It returns once the process has ended,
// having removed Options.RemoveDir. Calling it again does nothing but
// return the first call's error.
func (p *Process) Stop(steps ...Step) error {
	p.stopOnce.Do(func() {
		p.stopErr = p.terminate(steps)
		select {
		case <-p.done:
			p.stopErr = errors.Join(p.stopErr, p.logErr)
		default: // a signal failed: the process may still run
		}
		if p.removeDir != "" {
			os.RemoveAll(p.removeDir)
		}
	})
	return p.stopErr
}

func (p *Process) terminate(steps []Step) error {
	for _, step := range steps {
		select {
		case <-p.done:
			return nil
		default:
		}
		if err := p.cmd.Process.Signal(step.Signal); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("%s: signal: %w", p.name, err)
		}
		t := time.NewTimer(step.Wait)
		select {
		case <-p.done:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process and its process group (anything it
// started and left running) and waits until it has ended.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	// The child leads its own group (Setpgid): the group id is its pid.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: kill: %w", p.name, err)
	}
	<-p.done
	return nil
}

// EnvWithout returns this process's environment without the variables
// whose name drop reports.
func EnvWithout(drop func(name string) bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop(k) {
			env = append(env, kv)
		}
	}
	return env
}

// StartIn starts a server in dir, trying again while a port was taken.
//
// It calls start(dir, temp) with dir made (WorkDir(dir, pattern)) up to
// attempts times, while start fails because a port chosen free was taken
// by another process before the child bound it: an error wrapping exited
// that says "address already in use" (the child's output), and ctx is not
// done. temp is the temporary directory made when dir is "", which start
// hands to the child it starts as Options.RemoveDir; StartIn removes it
// when no attempt succeeded.
func StartIn[T any](ctx context.Context, name, dir, pattern string, attempts int, exited error,
	start func(dir, temp string) (T, error)) (T, error) {
	var zero T
	dir, temp, err := WorkDir(dir, pattern)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", name, err)
	}
	for range max(attempts, 1) {
		var v T
		if v, err = start(dir, temp); err == nil {
			return v, nil
		}
		if !errors.Is(err, exited) || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			break
		}
	}
	if temp != "" {
		os.RemoveAll(temp)
	}
	return zero, err
}

// WorkDir returns dir, created (mode 0700) when missing; an empty dir means
// a new temporary directory named after pattern (as os.MkdirTemp), returned
// as temp too: the caller removes it.
func WorkDir(dir, pattern string) (path, temp string, err error) {
	if dir == "" {
		if temp, err = os.MkdirTemp("", pattern); err != nil {
			return "", "", err
		}
		return temp, temp, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	return dir, "", nil
}

// BinOr returns bin, or find's binary when bin is "".
func BinOr(bin string, find func() (string, error)) (string, error) {
	if bin != "" {
		return bin, nil
	}
	return find()
}

// FindOrBuild returns find's binary, or build's when find fails with an
// error wrapping notInstalled.
func FindOrBuild(find func() (string, error), notInstalled error, build func() (string, error)) (string, error) {
	p, err := find()
	if err == nil || !errors.Is(err, notInstalled) {
		return p, err
	}
	return build()
}

type teeWriter struct {
	w    io.Writer
	tail *Tail
}

func (t teeWriter) Write(p []byte) (int, error) {
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	return t.tail.Write(p)
}

// Tail keeps the last bytes written to it (a process's output, for
// errors that say why it failed). Safe for concurrent use.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (b *Tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// String is what is kept.
func (b *Tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Reset forgets what was written.
func (b *Tail) Reset() {
	b.mu.Lock()
	b.buf = b.buf[:0]
	b.mu.Unlock()
}

// LastLine is the last non-empty line kept, trimmed.
func (b *Tail) LastLine() string {
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

package livekitserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure Start. The zero value runs a server on 127.0.0.1 with
// generated credentials and free ports.
type Options struct {
	// Bin is the livekit-server binary. Empty means Find().
	Bin string
	// IP is the address the signalling port and the ICE UDP mux bind to.
	// Empty means 127.0.0.1. "0.0.0.0" binds every address (NodeIP must
	// then be set).
	IP string
	// NodeIP is the address advertised in ICE candidates. Empty means IP.
	NodeIP string
	// Port is the HTTP/WebSocket signalling port, RTCTCPPort the ICE/TCP
	// port (bound on every address) and RTCUDPPort the single ICE UDP port.
	// Zero means a free port.
	Port, RTCTCPPort, RTCUDPPort int
	// APIKey and APISecret are the credentials the server accepts. Empty
	// means generated (NewKey, NewSecret). A secret must have at least
	// MinSecretLen characters.
	APIKey, APISecret string
	// Dir holds the config file (and the log when Log is nil). Empty means a
	// temporary directory, removed by Stop.
	Dir string
	// Log receives the server's output. Nil means the file
	// livekit-server.log in Dir.
	Log io.Writer
	// LogLevel is the server's log level. Empty means warn.
	LogLevel string
	// StartTimeout bounds the wait for the server to answer. Zero means 30 s.
	StartTimeout time.Duration
}

// Server is a running livekit-server.
type Server struct {
	// URL is the signalling URL clients connect to: ws://IP:Port.
	URL string
	// APIKey and APISecret sign access tokens the server accepts.
	APIKey, APISecret string
	// IP, NodeIP and the ports the server uses.
	IP, NodeIP                   string
	Port, RTCTCPPort, RTCUDPPort int
	// ConfigPath is the config file; LogPath the log file ("" when
	// Options.Log was given).
	ConfigPath, LogPath string

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	tail     *tailBuffer
	tempDir  string
	stopOnce sync.Once
	stopErr  error
}

// Start runs livekit-server with a generated config (see the package
// documentation) and returns once http://IP:Port/ answers. ctx bounds the
// start only; Stop ends the server. Ports chosen here that another process
// takes before the server binds them are chosen again (three attempts).
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	tempDir := ""
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "livekit-server-"); err != nil {
			return nil, fmt.Errorf("livekitserver: %w", err)
		}
		tempDir = o.Dir
	} else if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("livekitserver: %w", err)
	}
	var lastErr error
	for range 3 {
		try, err := choosePorts(o)
		if err != nil {
			lastErr = err
			break
		}
		s, err := launch(ctx, try, tempDir)
		if err == nil {
			return s, nil
		}
		lastErr = err
		chosen := o.Port == 0 || o.RTCTCPPort == 0 || o.RTCUDPPort == 0
		if !chosen || !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			break
		}
	}
	if tempDir != "" {
		os.RemoveAll(tempDir)
	}
	return nil, lastErr
}

// resolve fills the defaults and checks the options.
func resolve(o Options) (Options, error) {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	ip := net.ParseIP(o.IP)
	if ip == nil {
		return o, fmt.Errorf("%w: IP %q is not an IP address", ErrBadOptions, o.IP)
	}
	if o.NodeIP == "" {
		if ip.IsUnspecified() {
			return o, fmt.Errorf("%w: IP %s binds every address: set NodeIP to the address clients reach", ErrBadOptions, o.IP)
		}
		o.NodeIP = o.IP
	}
	if n := net.ParseIP(o.NodeIP); n == nil || n.IsUnspecified() {
		return o, fmt.Errorf("%w: NodeIP %q is not a specific IP address", ErrBadOptions, o.NodeIP)
	}
	switch {
	case o.APIKey == "" && o.APISecret == "":
		o.APIKey, o.APISecret = NewKey(), NewSecret()
	case o.APIKey == "" || o.APISecret == "":
		return o, fmt.Errorf("%w: give both an API key and a secret, or neither", ErrBadOptions)
	case len(o.APISecret) < MinSecretLen:
		return o, fmt.Errorf("%w: the API secret has %d characters, livekit-server wants at least %d", ErrBadOptions, len(o.APISecret), MinSecretLen)
	}
	if o.LogLevel == "" {
		o.LogLevel = "warn"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.Bin == "" {
		bin, err := Find()
		if err != nil {
			return o, err
		}
		o.Bin = bin
	}
	return o, nil
}

// choosePorts gives every zero port a free one. The listeners are held
// until all are chosen so the three differ.
func choosePorts(o Options) (Options, error) {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	if o.Port == 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(o.IP, "0"))
		if err != nil {
			return o, fmt.Errorf("livekitserver: no free TCP port on %s: %w", o.IP, err)
		}
		closers = append(closers, l)
		o.Port = l.Addr().(*net.TCPAddr).Port
	}
	if o.RTCTCPPort == 0 {
		l, err := net.Listen("tcp", ":0") // LiveKit binds its ICE/TCP port on every address
		if err != nil {
			return o, fmt.Errorf("livekitserver: no free TCP port: %w", err)
		}
		closers = append(closers, l)
		o.RTCTCPPort = l.Addr().(*net.TCPAddr).Port
	}
	if o.RTCUDPPort == 0 {
		c, err := net.ListenPacket("udp", net.JoinHostPort(o.IP, "0"))
		if err != nil {
			return o, fmt.Errorf("livekitserver: no free UDP port on %s: %w", o.IP, err)
		}
		closers = append(closers, c)
		o.RTCUDPPort = c.LocalAddr().(*net.UDPAddr).Port
	}
	return o, nil
}

// launch writes the config, starts the process and waits until it answers.
func launch(ctx context.Context, o Options, tempDir string) (*Server, error) {
	conf, err := render(o)
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "ws://" + net.JoinHostPort(o.IP, strconv.Itoa(o.Port)), APIKey: o.APIKey, APISecret: o.APISecret,
		IP: o.IP, NodeIP: o.NodeIP, Port: o.Port, RTCTCPPort: o.RTCTCPPort, RTCUDPPort: o.RTCUDPPort,
		ConfigPath: filepath.Join(o.Dir, "livekit-server.yaml"),
		done:       make(chan struct{}), tail: &tailBuffer{max: 16 << 10}, tempDir: tempDir,
	}
	if net.ParseIP(o.IP).IsUnspecified() {
		s.URL = "ws://" + net.JoinHostPort(o.NodeIP, strconv.Itoa(o.Port))
	}
	if err := os.WriteFile(s.ConfigPath, conf, 0o600); err != nil {
		return nil, fmt.Errorf("livekitserver: %w", err)
	}
	out := o.Log
	var logFile *os.File
	if out == nil {
		s.LogPath = filepath.Join(o.Dir, "livekit-server.log")
		if logFile, err = os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("livekitserver: log: %w", err)
		}
		out = logFile
	}
	cmd := exec.Command(o.Bin, "--config", s.ConfigPath)
	cmd.Env = childEnv()
	cmd.Dir = o.Dir
	// The server's output reaches us through a pipe; a log writer that
	// fails must not close it (the server would die of SIGPIPE).
	cmd.Stdout = s.tail.tee(out)
	cmd.Stderr = cmd.Stdout
	// Own process group: a terminal's ^C reaches the launcher, which stops
	// the server in order. Pdeathsig: the server does not outlive a
	// launcher that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	s.cmd = cmd

	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child exits:
		// keep this goroutine on its thread until the child has ended.
		runtime.LockOSThread()
		if logFile != nil {
			defer logFile.Close()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			close(s.done)
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("livekitserver: start %s: %w", o.Bin, err)
	}
	if err := s.waitAnswers(ctx, o.StartTimeout); err != nil {
		_ = s.kill()
		return nil, err
	}
	return s, nil
}

// waitAnswers polls http://IP:Port/ until it answers, the process exits or
// timeout passes.
func (s *Server) waitAnswers(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	url := "http://" + net.JoinHostPort(s.dialIP(), strconv.Itoa(s.Port)) + "/"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("%w before answering (%v); output:\n%s", ErrExited, s.waitErr, s.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("livekitserver: %s did not answer within %s: %w; output:\n%s", url, timeout, err, s.tail.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dialIP is the address to reach the signalling port at.
func (s *Server) dialIP() string {
	if net.ParseIP(s.IP).IsUnspecified() {
		return s.NodeIP
	}
	return s.IP
}

// HTTPURL is the server's HTTP base URL (http://IP:Port), for its Twirp API.
func (s *Server) HTTPURL() string {
	return "http://" + net.JoinHostPort(s.dialIP(), strconv.Itoa(s.Port))
}

// Done is closed when the server process has ended.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is why the process ended (nil before it has).
func (s *Server) Err() error {
	select {
	case <-s.done:
		if s.waitErr != nil {
			return fmt.Errorf("%w: %v", ErrExited, s.waitErr)
		}
		return ErrExited
	default:
		return nil
	}
}

// Output returns the last 16 KiB the server printed.
func (s *Server) Output() string { return s.tail.String() }

// Stop ends the server: SIGTERM (which waits for participants), a second
// SIGTERM after a second (which does not), SIGKILL after five more. It
// removes the temporary directory Start made. Calling it again does nothing.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.terminate()
		if s.tempDir != "" {
			os.RemoveAll(s.tempDir)
		}
	})
	return s.stopErr
}

func (s *Server) terminate() error {
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, time.Second}, {syscall.SIGTERM, 5 * time.Second}} {
		select {
		case <-s.done:
			return nil
		default:
		}
		if err := s.cmd.Process.Signal(step.sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("livekitserver: signal: %w", err)
		}
		select {
		case <-s.done:
			return nil
		case <-time.After(step.wait):
		}
	}
	return s.kill()
}

func (s *Server) kill() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("livekitserver: kill: %w", err)
	}
	<-s.done
	return nil
}

// tee returns a writer that copies to w (ignoring its errors) and keeps
// the tail.
func (b *tailBuffer) tee(w io.Writer) io.Writer { return teeWriter{w: w, tail: b} }

type teeWriter struct {
	w    io.Writer
	tail *tailBuffer
}

func (t teeWriter) Write(p []byte) (int, error) {
	_, _ = t.w.Write(p)
	return t.tail.Write(p)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

package jaeger

import (
	"context"
	"encoding/json"
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

var (
	// ErrExited: the Jaeger process ended before it was healthy, or while running.
	ErrExited = errors.New("jaeger: jaeger exited")
	// ErrPortInUse: a port Options fixes is taken (by another Jaeger?).
	ErrPortInUse = errors.New("jaeger: port in use")
)

// Host is the only address the started Jaeger binds.
const Host = "127.0.0.1"

// Default ports, Jaeger's own: the UI and query API, OTLP over gRPC and over HTTP.
const (
	DefaultUIPort       = 16686
	DefaultOTLPGRPCPort = 4317
	DefaultOTLPHTTPPort = 4318
)

// Options configure Start. The zero value runs Jaeger on free ports of
// 127.0.0.1 with its files in a temporary directory.
type Options struct {
	// Bin is the Jaeger binary. Empty means Find().
	Bin string
	// Dir holds the configuration file (and the log when Log is nil).
	// Empty means a temporary directory, removed by Stop.
	Dir string
	// UIPort serves the UI and the query API (HTTP), OTLPGRPCPort and
	// OTLPHTTPPort receive spans. Zero means a free port.
	UIPort, OTLPGRPCPort, OTLPHTTPPort int
	// UIAssets is a directory holding the UI to serve: index.html and
	// static/ (a built jaeger-ui, jaeger-ui's packages/jaeger-ui/build, say).
	// Empty: the trace viewer embedded in this package (UI), written to
	// Dir/ui.
	UIAssets string
	// MaxTraces is how many traces the in-memory store keeps (the oldest
	// go first). Zero means 100000.
	MaxTraces int
	// Log receives Jaeger's output. Nil means the file jaeger.log in Dir.
	Log io.Writer
	// StartTimeout bounds the wait for Jaeger to be healthy. Zero means 60 s.
	StartTimeout time.Duration
}

// Server is a running Jaeger.
type Server struct {
	// UIURL is the UI and query API: http://127.0.0.1:UIPort.
	UIURL string
	// OTLPHTTPURL is the OTLP/HTTP receiver, the value for
	// OTEL_EXPORTER_OTLP_ENDPOINT: http://127.0.0.1:OTLPHTTPPort.
	OTLPHTTPURL string
	// OTLPGRPCAddr is the OTLP/gRPC receiver: 127.0.0.1:OTLPGRPCPort.
	OTLPGRPCAddr string
	// Ports in use.
	UIPort, OTLPGRPCPort, OTLPHTTPPort, QueryGRPCPort, HealthPort int
	// UIAssets is the directory of the UI served.
	UIAssets string
	// EmbeddedUI: the UI served is this package's trace viewer (Options
	// named no other).
	EmbeddedUI bool
	// ConfigPath is the configuration file; LogPath the log file ("" when
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

// Start runs Jaeger with a generated configuration (see the package
// documentation) and returns once its health check reports every component
// ready. ctx bounds the start only; Stop ends Jaeger. Ports chosen here that
// another process takes before Jaeger binds them are chosen again (three
// attempts).
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	tempDir := ""
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "jaeger-"); err != nil {
			return nil, fmt.Errorf("jaeger: %w", err)
		}
		tempDir = o.Dir
	} else if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("jaeger: %w", err)
	}
	embedded := o.UIAssets == ""
	if embedded {
		if o.UIAssets, err = filepath.Abs(filepath.Join(o.Dir, "ui")); err == nil {
			err = WriteUI(o.UIAssets)
		}
		if err != nil {
			if tempDir != "" {
				os.RemoveAll(tempDir)
			}
			return nil, err
		}
	}
	var lastErr error
	for range 3 {
		p, err := choosePorts(o)
		if err != nil {
			lastErr = err
			break
		}
		s, err := launch(ctx, o, p, tempDir)
		if err == nil {
			s.EmbeddedUI = embedded
			return s, nil
		}
		lastErr = err
		// Another process took a port chosen here before Jaeger bound it.
		if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			break
		}
	}
	if tempDir != "" {
		os.RemoveAll(tempDir)
	}
	return nil, lastErr
}

func resolve(o Options) (Options, error) {
	for _, p := range []int{o.UIPort, o.OTLPGRPCPort, o.OTLPHTTPPort} {
		if p < 0 || p > 65535 {
			return o, fmt.Errorf("jaeger: port %d: want 0..65535", p)
		}
	}
	if o.UIAssets != "" {
		abs, err := filepath.Abs(o.UIAssets)
		if err != nil {
			return o, fmt.Errorf("jaeger: UI assets: %w", err)
		}
		if _, err := os.Stat(filepath.Join(abs, "index.html")); err != nil {
			return o, fmt.Errorf("jaeger: UI assets %s: want a UI's index.html (a built jaeger-ui): %w", o.UIAssets, err)
		}
		o.UIAssets = abs
	}
	if o.MaxTraces <= 0 {
		o.MaxTraces = 100000
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
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

// ports are the five ports of one launch.
type ports struct{ ui, otlpGRPC, otlpHTTP, queryGRPC, health int }

// choosePorts gives every zero port of o, and the query gRPC and health
// ports, a free port of Host, and checks that the ports o fixes are free.
// The listeners are held until all are chosen so that they differ.
func choosePorts(o Options) (ports, error) {
	p := ports{ui: o.UIPort, otlpGRPC: o.OTLPGRPCPort, otlpHTTP: o.OTLPHTTPPort}
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for _, port := range []*int{&p.ui, &p.otlpGRPC, &p.otlpHTTP, &p.queryGRPC, &p.health} {
		addr := net.JoinHostPort(Host, strconv.Itoa(*port))
		l, err := net.Listen("tcp", addr)
		if err != nil && *port != 0 {
			return p, fmt.Errorf("%w: %s: %v", ErrPortInUse, addr, err)
		}
		if err != nil {
			return p, fmt.Errorf("jaeger: no free TCP port on %s: %w", Host, err)
		}
		closers = append(closers, l)
		*port = l.Addr().(*net.TCPAddr).Port
	}
	return p, nil
}

// render returns Jaeger's configuration: an OpenTelemetry Collector
// configuration in JSON (which the collector reads as YAML), every
// endpoint on Host.
func render(o Options, p ports) ([]byte, error) {
	ep := func(port int) map[string]any {
		return map[string]any{"endpoint": net.JoinHostPort(Host, strconv.Itoa(port))}
	}
	query := map[string]any{
		"storage":        map[string]any{"traces": "memstore"},
		"enable_tracing": false,
		"http":           ep(p.ui),
		"grpc":           ep(p.queryGRPC),
	}
	if o.UIAssets != "" {
		query["ui"] = map[string]any{"assets_path": o.UIAssets}
	}
	cfg := map[string]any{
		"service": map[string]any{
			"extensions": []string{"jaeger_storage", "jaeger_query", "healthcheckv2"},
			"pipelines": map[string]any{"traces": map[string]any{
				"receivers": []string{"otlp"}, "processors": []string{"batch"}, "exporters": []string{"jaeger_storage_exporter"}}},
			"telemetry": map[string]any{
				"resource": map[string]any{"service.name": "jaeger"},
				"metrics":  map[string]any{"level": "none"},
				"logs":     map[string]any{"level": "info", "encoding": "console"},
			},
		},
		"extensions": map[string]any{
			"healthcheckv2":  map[string]any{"use_v2": true, "http": ep(p.health)},
			"jaeger_query":   query,
			"jaeger_storage": map[string]any{"backends": map[string]any{"memstore": map[string]any{"memory": map[string]any{"max_traces": o.MaxTraces}}}},
		},
		"receivers":  map[string]any{"otlp": map[string]any{"protocols": map[string]any{"grpc": ep(p.otlpGRPC), "http": ep(p.otlpHTTP)}}},
		"processors": map[string]any{"batch": map[string]any{}},
		"exporters":  map[string]any{"jaeger_storage_exporter": map[string]any{"trace_storage": "memstore"}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("jaeger: config: %w", err)
	}
	return append(b, '\n'), nil
}

// launch writes the configuration, starts the process and waits until it
// is healthy.
func launch(ctx context.Context, o Options, p ports, tempDir string) (*Server, error) {
	conf, err := render(o, p)
	if err != nil {
		return nil, err
	}
	hostPort := func(port int) string { return net.JoinHostPort(Host, strconv.Itoa(port)) }
	s := &Server{
		UIURL: "http://" + hostPort(p.ui), OTLPHTTPURL: "http://" + hostPort(p.otlpHTTP), OTLPGRPCAddr: hostPort(p.otlpGRPC),
		UIPort: p.ui, OTLPGRPCPort: p.otlpGRPC, OTLPHTTPPort: p.otlpHTTP, QueryGRPCPort: p.queryGRPC, HealthPort: p.health,
		UIAssets: o.UIAssets, ConfigPath: filepath.Join(o.Dir, "jaeger.yaml"),
		done: make(chan struct{}), tail: &tailBuffer{max: 16 << 10}, tempDir: tempDir,
	}
	if err := os.WriteFile(s.ConfigPath, conf, 0o600); err != nil {
		return nil, fmt.Errorf("jaeger: %w", err)
	}
	out := o.Log
	var logFile *os.File
	if out == nil {
		s.LogPath = filepath.Join(o.Dir, "jaeger.log")
		if logFile, err = os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("jaeger: log: %w", err)
		}
		out = logFile
	}
	cmd := exec.Command(o.Bin, "--config", s.ConfigPath)
	cmd.Env = childEnv()
	cmd.Dir = o.Dir
	// A log writer that fails must not close the pipe (SIGPIPE).
	cmd.Stdout = teeWriter{w: out, tail: s.tail}
	cmd.Stderr = cmd.Stdout
	// Own process group: a terminal's ^C reaches the launcher, which stops
	// Jaeger last (after the spans are flushed). Pdeathsig: Jaeger does not
	// outlive a launcher that is killed.
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
		return nil, fmt.Errorf("jaeger: start %s: %w", o.Bin, err)
	}
	if err := s.waitHealthy(ctx, o.StartTimeout); err != nil {
		_ = s.kill()
		return nil, err
	}
	return s, nil
}

// childEnv is this process's environment without the OTEL_* variables:
// Jaeger is configured by its file alone (and must not trace itself into
// itself).
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitHealthy polls the health check's /status until it answers 200 (every
// component started), the process exits or timeout passes.
func (s *Server) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	url := "http://" + net.JoinHostPort(Host, strconv.Itoa(s.HealthPort)) + "/status"
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health %s", resp.Status)
		}
		last = err
		select {
		case <-s.done:
			return fmt.Errorf("%w before it was healthy (%v); output:\n%s", ErrExited, s.waitErr, s.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("jaeger: %s not healthy within %s: %v; output:\n%s", url, timeout, last, s.tail.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Done is closed when the process has ended.
func (s *Server) Done() <-chan struct{} { return s.done }

// PID is the process id of Jaeger.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Output returns the last 16 KiB Jaeger printed.
func (s *Server) Output() string { return s.tail.String() }

// Stop ends Jaeger: SIGTERM, SIGKILL after ten seconds. It removes the
// temporary directory Start made. Calling it again does nothing.
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
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("jaeger: signal: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	return s.kill()
}

func (s *Server) kill() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("jaeger: kill: %w", err)
	}
	<-s.done
	return nil
}

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

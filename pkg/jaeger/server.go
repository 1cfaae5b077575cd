package jaeger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alicia-voice/alicia/pkg/childproc"
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

	proc *childproc.Process
}

// Start runs Jaeger with a generated configuration (see the package
// documentation) and returns once its health check reports every component
// ready. ctx bounds the start only; Stop ends Jaeger. Ports chosen here that
// another process takes before Jaeger binds them are chosen again (three
// attempts).
func Start(ctx context.Context, opts Options) (*Server, error) {
	embedded := opts.UIAssets == ""
	o, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	return childproc.StartIn(ctx, "jaeger", o.Dir, "jaeger-", 3, ErrExited, func(dir, temp string) (*Server, error) {
		o.Dir = dir
		if embedded && o.UIAssets == "" { // once: not again on another attempt
			ui, err := filepath.Abs(filepath.Join(o.Dir, "ui"))
			if err == nil {
				err = WriteUI(ui)
			}
			if err != nil {
				return nil, err
			}
			o.UIAssets = ui
		}
		p, err := choosePorts(o)
		if err != nil {
			return nil, err
		}
		s, err := launch(ctx, o, p, temp)
		if err == nil {
			s.EmbeddedUI = embedded
		}
		return s, err
	})
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
	var err error
	o.Bin, err = childproc.BinOr(o.Bin, Find)
	return o, err
}

// ports are the five ports of one launch.
type ports struct{ ui, otlpGRPC, otlpHTTP, queryGRPC, health int }

// choosePorts gives every zero port of o, and the query gRPC and health
// ports, a free port of Host, and checks that the ports o fixes are free.
// The listeners are held until all are chosen so that they differ.
func choosePorts(o Options) (ports, error) {
	p := ports{ui: o.UIPort, otlpGRPC: o.OTLPGRPCPort, otlpHTTP: o.OTLPHTTPPort}
	var closers []net.Listener // held only to reserve their ports
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
	}
	if o.Log == nil {
		s.LogPath = filepath.Join(o.Dir, "jaeger.log")
	}
	// Jaeger runs in its own process group: a terminal's ^C reaches the
	// launcher, which stops Jaeger last (after the spans are flushed); it
	// does not outlive a launcher that is killed. The health check's
	// /status answers 200 once every component has started.
	s.proc, err = childproc.Start(ctx, childproc.Options{
		Name: "jaeger", Path: o.Bin, Args: []string{"--config", s.ConfigPath}, Dir: o.Dir, Env: childEnv(),
		Config: conf, ConfigPath: s.ConfigPath,
		Log: o.Log, LogPath: s.LogPath,
		Ready:        childproc.HTTPOK("http://" + hostPort(p.health) + "/status"),
		PollInterval: 50 * time.Millisecond, ReadyTimeout: o.StartTimeout, Exited: ErrExited, RemoveDir: tempDir,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// childEnv is this process's environment without the OTEL_* variables:
// Jaeger is configured by its file alone (and must not trace itself into
// itself).
func childEnv() []string {
	return childproc.EnvWithout(func(k string) bool { return strings.HasPrefix(k, "OTEL_") })
}

// Done is closed when the process has ended.
func (s *Server) Done() <-chan struct{} { return s.proc.Done() }

// PID is the process id of Jaeger.
func (s *Server) PID() int { return s.proc.PID() }

// Output returns the last 16 KiB Jaeger printed.
func (s *Server) Output() string { return s.proc.Output() }

// Stop ends Jaeger: SIGTERM, SIGKILL after ten seconds. It removes the
// temporary directory Start made. Calling it again does nothing.
func (s *Server) Stop() error {
	return s.proc.Stop(childproc.Step{Signal: syscall.SIGTERM, Wait: 10 * time.Second})
}

package tools

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/childproc"
	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// stdioTerminate is how long a stdio server has to exit after its stdin is
// closed before it is sent SIGTERM.
const stdioTerminate = 2 * time.Second

// mcpServer keeps one MCP server connected: it connects, lists the tools,
// registers them, watches the session (the process exiting, pings failing,
// calls failing on the transport) and reconnects with backoff. One
// goroutine (run) owns the session; the others only signal it.
type mcpServer struct {
	name string
	r    *Registry
	log  zerolog.Logger
	prev <-chan struct{} // done of the server's previous supervisor, if it is still stopping

	sess   atomic.Pointer[mcp.ClientSession] // set while connected
	stderr *childproc.Tail

	mu            sync.Mutex
	cfg           serverConfig // wanted configuration
	deleted       bool
	lastErr       string
	status        protocol.MCPServerStatusStatus
	cancelAttempt context.CancelFunc // ends a connect in progress

	wake    chan struct{} // the configuration changed or the server was deleted
	check   chan struct{} // a call failed on the transport
	refresh chan struct{} // the server's tool list changed
	done    chan struct{}
}

func newMCPServer(r *Registry, cfg serverConfig, prev <-chan struct{}) *mcpServer {
	return &mcpServer{
		name:    cfg.Name,
		r:       r,
		log:     r.log.With().Str("mcp_server", cfg.Name).Logger(),
		prev:    prev,
		stderr:  childproc.NewTail(2048),
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		check:   make(chan struct{}, 1),
		refresh: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// update sets a new wanted configuration; an equal one changes nothing.
func (s *mcpServer) update(cfg serverConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted || s.cfg.equal(cfg) {
		return
	}
	s.cfg = cfg
	if s.cancelAttempt != nil {
		s.cancelAttempt()
	}
	signal(s.wake)
}

// remove disconnects the server for good and drops its tools.
func (s *mcpServer) remove() {
	s.mu.Lock()
	s.deleted = true
	if s.cancelAttempt != nil {
		s.cancelAttempt()
	}
	s.mu.Unlock()
	signal(s.wake)
}

func (s *mcpServer) suspect() { signal(s.check) }

func (s *mcpServer) desired() (serverConfig, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg, s.deleted
}

func (s *mcpServer) current() *mcp.ClientSession { return s.sess.Load() }

func (s *mcpServer) connected() bool { return s.sess.Load() != nil }

// unavailable is the error of a call while the server is not connected.
func (s *mcpServer) unavailable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr != "" {
		return fmt.Errorf("%w: %q (%s)", ErrServerUnavailable, s.name, s.lastErr)
	}
	return fmt.Errorf("%w: %q", ErrServerUnavailable, s.name)
}

func (s *mcpServer) setStatus(st protocol.MCPServerStatusStatus, lastErr string) {
	s.mu.Lock()
	s.status = st
	if st == protocol.MCPServerStatusStatusError {
		s.lastErr = lastErr
	} else if st == protocol.MCPServerStatusStatusConnected {
		s.lastErr = ""
	}
	s.mu.Unlock()
	s.r.publishStatus(s.name, st, lastErr)
}

// ServerState is an MCP server as the registry sees it.
type ServerState struct {
	Name      string
	Status    string // connecting, connected, error, disconnected
	LastError string
}

func (s *mcpServer) state() ServerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := string(s.status)
	if st == "" {
		st = string(protocol.MCPServerStatusStatusUnknown)
	}
	return ServerState{Name: s.name, Status: st, LastError: s.lastErr}
}

// run is the server's supervisor loop, until it is deleted or ctx ends.
func (s *mcpServer) run(ctx context.Context) {
	defer close(s.done)
	if s.prev != nil {
		select {
		case <-s.prev:
		case <-ctx.Done():
		}
	}
	backoff := s.r.cfg.MCPBackoffMin
	for {
		cfg, deleted := s.desired()
		switch {
		case deleted || ctx.Err() != nil:
			s.finish(deleted)
			return
		case !cfg.Enabled:
			s.r.dropTools(s)
			s.setStatus(protocol.MCPServerStatusStatusDisconnected, "")
			select {
			case <-s.wake:
			case <-ctx.Done():
			}
			continue
		}
		s.setStatus(protocol.MCPServerStatusStatusConnecting, "")
		wasConnected, err := s.connectAndServe(ctx, cfg)
		if err == nil || ctx.Err() != nil {
			backoff = s.r.cfg.MCPBackoffMin
			continue
		}
		if c, del := s.desired(); del || !c.equal(cfg) {
			continue // the attempt was cut short by a new configuration
		}
		if wasConnected {
			backoff = s.r.cfg.MCPBackoffMin
		}
		s.log.Warn().Err(err).Dur("retry_in", backoff).Msg("MCP server unavailable")
		s.setStatus(protocol.MCPServerStatusStatusError, err.Error())
		wait := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-wait.C:
		case <-s.wake:
		case <-ctx.Done():
		}
		wait.Stop()
		backoff = min(2*backoff, s.r.cfg.MCPBackoffMax)
	}
}

// finish ends the supervisor: the server is disconnected, and when it was
// deleted its tools are dropped here and in alicia_tools.
func (s *mcpServer) finish(deleted bool) {
	if deleted {
		s.r.dropTools(s)
	}
	s.setStatus(protocol.MCPServerStatusStatusDisconnected, "")
	if !deleted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.r.publishRegistration(ctx, MCPSource(s.name), s.name, nil); err != nil {
		s.log.Warn().Err(err).Msg("removal of the MCP server's tools not published")
	}
	s.log.Info().Msg("MCP server removed")
}

// connectAndServe runs one session. It returns nil when the session ended
// because the configuration changed, the server was deleted or ctx ended,
// and the failure otherwise; wasConnected says whether it got that far.
func (s *mcpServer) connectAndServe(ctx context.Context, cfg serverConfig) (wasConnected bool, err error) {
	actx, cancel := context.WithTimeout(ctx, s.r.cfg.MCPConnectTimeout)
	s.mu.Lock()
	s.cancelAttempt = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancelAttempt = nil
		s.mu.Unlock()
		cancel()
	}()

	sess, err := s.connect(actx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		s.sess.Store(nil)
		_ = sess.Close()
	}()
	if err := s.listTools(actx, sess); err != nil {
		return false, s.describe(fmt.Errorf("listing tools: %w", err))
	}
	// Status first: whoever sees the tools can already see "connected".
	s.setStatus(protocol.MCPServerStatusStatusConnected, "")
	s.sess.Store(sess)
	s.log.Info().Str("transport", cfg.Transport).Msg("MCP server connected")

	closed := make(chan error, 1)
	go func() { closed <- sess.Wait() }()
	tick := time.NewTicker(s.r.cfg.MCPPingInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-s.wake:
			if c, del := s.desired(); del || !c.equal(cfg) {
				return true, nil
			}
		case err := <-closed:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return true, s.describe(fmt.Errorf("connection lost: %w", err))
		case <-s.check:
			if err := s.ping(ctx, sess); err != nil {
				return true, err
			}
		case <-tick.C:
			if err := s.ping(ctx, sess); err != nil {
				return true, err
			}
		case <-s.refresh:
			if err := s.listTools(ctx, sess); err != nil {
				s.log.Warn().Err(err).Msg("MCP tool list not refreshed")
			}
		}
	}
}

func (s *mcpServer) ping(ctx context.Context, sess *mcp.ClientSession) error {
	pctx, cancel := context.WithTimeout(ctx, min(s.r.cfg.MCPPingInterval, 10*time.Second))
	defer cancel()
	if err := sess.Ping(pctx, nil); err != nil && ctx.Err() == nil {
		return s.describe(fmt.Errorf("ping failed: %w", err))
	}
	return nil
}

// connect starts a session over the configured transport.
func (s *mcpServer) connect(ctx context.Context, cfg serverConfig) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "alicia", Title: "Alicia voice assistant", Version: "1.0.0"}, &mcp.ClientOptions{
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { signal(s.refresh) },
	})
	var t mcp.Transport
	switch cfg.Transport {
	case TransportStdio:
		s.stderr.Reset()
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = childEnv(cfg.Env)
		cmd.Stderr = s.stderr
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: stdioTerminate}
	case TransportHTTP:
		t = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: s.r.http, MaxRetries: 2}
	default:
		return nil, fmt.Errorf("%w: transport %q", ErrInvalidConfig, cfg.Transport)
	}
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, s.describe(fmt.Errorf("connect: %w", err))
	}
	return sess, nil
}

// listTools registers the server's tools (all pages) and publishes them.
func (s *mcpServer) listTools(ctx context.Context, sess *mcp.ClientSession) error {
	var tools []Tool
	names := map[string]bool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		name := MCPToolName(s.name, t.Name)
		if names[name] || s.r.takenByOther(name, s) {
			name = name[:min(len(name), MaxToolNameLength-9)] + "_" + shortHash(s.name+"\x00"+t.Name)
		}
		names[name] = true
		params, err := toJSONMap(t.InputSchema)
		if err != nil || params == nil {
			params = map[string]any{"type": "object"}
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		tools = append(tools, &mcpTool{server: s, remote: t.Name, spec: Spec{
			Name: name, Description: desc, Parameters: params, Source: MCPSource(s.name),
		}})
	}
	specs := s.r.replaceTools(s, tools)
	if err := s.r.publishRegistration(ctx, MCPSource(s.name), s.name, specs); err != nil {
		s.log.Warn().Err(err).Msg("MCP tool registration not published")
	}
	return nil
}

// describe adds what a stdio server last wrote on stderr, which usually
// says why it failed.
func (s *mcpServer) describe(err error) error {
	if tail := clip.Bytes(s.stderr.LastLine(), 300); tail != "" {
		return fmt.Errorf("%w (stderr: %s)", err, tail)
	}
	return err
}

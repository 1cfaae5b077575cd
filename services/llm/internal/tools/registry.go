package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/netguard"
)

// Sources of tools, as ToolRegistration and Spec.Source name them.
const SourceBuiltin = "builtin"

// MCPSource is the source name of an MCP server's tools: "mcp:<server>".
func MCPSource(server string) string { return "mcp:" + server }

// Querier reads Postgres; a *pgxpool.Pool on a read-only session fits.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Registry holds the built-in tools and the tools of MCP servers, with the
// enabled flags of alicia_tools kept current from ToolSetting envelopes.
// Its methods are safe for concurrent use.
type Registry struct {
	cfg  Config
	log  zerolog.Logger
	nc   *nats.Conn
	pub  *bus.Publisher
	http *http.Client // MCP streamable HTTP sessions

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	consumers []jetstream.ConsumeContext
	closeOnce sync.Once

	mu       sync.RWMutex
	tools    map[string]*entry
	enabled  map[string]bool // alicia_tools.enabled by name; absent = enabled
	servers  map[string]*mcpServer
	retiring []*mcpServer            // deleted, still disconnecting
	operator map[string]serverConfig // the stdio servers of ALICIA_MCP_SERVERS_FILE
	guard    *netguard.Guard         // where HTTP MCP sessions may connect

	regMu   sync.Mutex
	lastReg map[string]string // source → content hash last published
}

// entry is one registered tool.
type entry struct {
	tool      Tool
	spec      Spec
	validator *argsValidator // nil: arguments are not checked here
	server    *mcpServer     // nil for built-in tools
}

// New builds the registry: it reads the enabled flags and MCP servers from
// Postgres (db should be a read-only session), follows ToolSetting and
// MCPServerConfig envelopes on the SYSTEM stream from then on, publishes the
// built-in tools' ToolRegistration and starts connecting to the MCP servers
// in the background. ctx bounds the start only; Close stops everything.
func New(ctx context.Context, cfg Config, nc *nats.Conn, js jetstream.JetStream, db Querier, log zerolog.Logger) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	web, err := NewWebSearch(cfg)
	if err != nil {
		return nil, err
	}
	operator := map[string]serverConfig{}
	var stamp fileStamp
	if cfg.MCPServersFile != "" {
		if stamp, err = stampOf(cfg.MCPServersFile); err != nil {
			return nil, fmt.Errorf("%w: ALICIA_MCP_SERVERS_FILE: %w", ErrInvalidConfig, err)
		}
		if operator, err = readOperatorFile(cfg.MCPServersFile); err != nil {
			return nil, err
		}
	}
	guard := newGuard(cfg)
	// No proxy (it would resolve the host for us) and every connection,
	// redirects included, through the guard.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.DialContext = guard.DialContext
	rctx, cancel := context.WithCancel(context.Background())
	r := &Registry{
		cfg:      cfg,
		log:      log.With().Str("component", "tools").Logger(),
		nc:       nc,
		pub:      bus.NewPublisher(js),
		http:     &http.Client{Transport: transport},
		operator: map[string]serverConfig{},
		guard:    guard,
		ctx:      rctx,
		cancel:   cancel,
		tools:    map[string]*entry{},
		enabled:  map[string]bool{},
		servers:  map[string]*mcpServer{},
		lastReg:  map[string]string{},
	}
	var builtins []Spec
	for _, t := range []Tool{NewCalculator(), NewMemoryQuery(nc), web} {
		if err := r.add(t, nil); err != nil {
			cancel()
			return nil, err
		}
		builtins = append(builtins, t.Spec())
	}
	servers, err := r.follow(ctx, js, db)
	if err != nil {
		r.Close()
		return nil, err
	}
	if err := r.publishRegistration(ctx, SourceBuiltin, "", builtins); err != nil {
		r.Close()
		return nil, err
	}
	// The operator's servers keep the enabled setting stored for them.
	stored := map[string]bool{}
	for _, sc := range servers {
		stored[sc.Name] = sc.Enabled
	}
	r.mu.Lock()
	r.operator = operator
	r.mu.Unlock()
	for _, name := range sortedKeys(operator) {
		c := operator[name]
		if on, ok := stored[name]; ok {
			c.Enabled = on
		}
		r.upsertServer(c)
		r.publishOperatorServer(c)
	}
	for _, sc := range servers {
		if _, ok := operator[sc.Name]; ok || !sc.Enabled {
			continue
		}
		r.applyUntrusted(sc, true)
	}
	if cfg.MCPServersFile != "" {
		r.wg.Add(1)
		go r.watchOperatorFile(stamp)
	}
	return r, nil
}

// AddBuiltins registers more built-in tools (the timers', whose scheduler
// starts after the registry) and publishes the built-in set again.
func (r *Registry) AddBuiltins(ctx context.Context, ts ...Tool) error {
	for _, t := range ts {
		if err := r.add(t, nil); err != nil {
			return err
		}
	}
	r.mu.RLock()
	var specs []Spec
	for _, e := range r.tools {
		if e.server == nil {
			specs = append(specs, e.spec)
		}
	}
	r.mu.RUnlock()
	return r.publishRegistration(ctx, SourceBuiltin, "", specs)
}

// add registers a tool (replacing one of the same name).
func (r *Registry) add(t Tool, server *mcpServer) error {
	spec := t.Spec()
	v, err := newValidator(spec.Parameters)
	if err != nil {
		if server == nil {
			return fmt.Errorf("tools: schema of %s: %w", spec.Name, err)
		}
		// The server checks its own input; a schema we cannot resolve only
		// costs the local check.
		r.log.Warn().Err(err).Str("tool", spec.Name).Msg("tool schema not usable for validation")
	}
	r.mu.Lock()
	r.tools[spec.Name] = &entry{tool: t, spec: spec, validator: v, server: server}
	r.mu.Unlock()
	return nil
}

// Available returns the specs of the tools the model may call now: enabled
// in alicia_tools and, for MCP tools, with their server connected. Sorted by
// name, so the prompt stays the same from turn to turn.
func (r *Registry) Available(context.Context) []Spec {
	r.mu.RLock()
	out := make([]Spec, 0, len(r.tools))
	for name, e := range r.tools {
		if r.isEnabled(name) && (e.server == nil || e.server.connected()) {
			out = append(out, e.spec)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Spec returns the spec of a registered tool, enabled or not.
func (r *Registry) Spec(name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	if !ok {
		return Spec{}, false
	}
	return e.spec, true
}

// Timeout is how long Call lets the named tool run (the ToolUseRequest's
// timeoutMs).
func (r *Registry) Timeout(name string) time.Duration { return r.cfg.TimeoutOf(name) }

func (r *Registry) isEnabled(name string) bool {
	on, ok := r.enabled[name]
	return !ok || on
}

// Call runs a tool with its timeout. Errors: ErrUnknownTool (not registered
// or disabled), ErrInvalidParameters (args do not fit the tool's schema, or
// the tool rejected them), one wrapping context.DeadlineExceeded when the
// tool ran out of time, the caller's context error when ctx ended; anything
// else is an execution error whose message is meant for the model.
func (r *Registry) Call(ctx context.Context, name string, inv Invocation, args map[string]any) (any, error) {
	r.mu.RLock()
	e, ok := r.tools[name]
	enabled := r.isEnabled(name)
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	if !enabled {
		return nil, fmt.Errorf("%w: %q is disabled", ErrUnknownTool, name)
	}
	args, err := normalizeArgs(args)
	if err != nil {
		return nil, err
	}
	if err := e.validator.validate(args); err != nil {
		return nil, err
	}
	timeout := r.cfg.TimeoutOf(name)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type outcome struct {
		v   any
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.log.Error().Str("tool", name).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("tool panicked")
				done <- outcome{err: fmt.Errorf("%w: internal error in %s", ErrToolFailed, name)}
			}
		}()
		v, err := e.tool.Call(cctx, inv, args)
		done <- outcome{v, err}
	}()
	var o outcome
	select {
	case o = <-done:
		if o.err == nil {
			r.log.Debug().Str("tool", name).Dur("took", time.Since(start)).Msg("tool call")
			return o.v, nil
		}
	case <-cctx.Done():
		// A tool that ignores its context does not hold the turn.
		o.err = cctx.Err()
	}
	r.log.Debug().Str("tool", name).Dur("took", time.Since(start)).Str("error", o.err.Error()).Msg("tool call failed")
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s did not finish within %s: %w", name, timeout, context.DeadlineExceeded)
	}
	return nil, o.err
}

// stopConsumers stops following the bus.
func (r *Registry) stopConsumers() {
	for _, cc := range r.consumers {
		cc.Stop()
		<-cc.Closed()
	}
	r.consumers = nil
}

// Close stops following the bus and disconnects every MCP server (each
// publishes its disconnected status). It waits for that to finish.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		r.stopConsumers()
		r.cancel()
		r.wg.Wait()
		r.http.CloseIdleConnections()
	})
}

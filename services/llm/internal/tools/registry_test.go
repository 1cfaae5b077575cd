package tools_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

var builtinNames = []string{"calculator", "memory_query", "web_search"}

func TestRegistryBuiltins(t *testing.T) {
	h := newHarness(t)
	r := h.registry(testConfig())
	specs := r.Available(testContext(t))
	if got := names(specs); !reflect.DeepEqual(got, builtinNames) {
		t.Fatalf("Available = %v, want %v", got, builtinNames)
	}
	for _, s := range specs {
		if s.Source != tools.SourceBuiltin || s.Description == "" || s.Parameters["type"] != "object" {
			t.Fatalf("spec %+v", s)
		}
	}
	regs := system[*protocol.ToolRegistration](h)
	if len(regs) != 1 || regs[0].Source != "builtin" || len(regs[0].Tools) != 3 {
		t.Fatalf("registrations: %+v", regs)
	}
	for i, tool := range regs[0].Tools {
		if tool.Name != builtinNames[i] || tool.Description == nil || tool.MCPServer != nil || tool.Parameters["properties"] == nil {
			t.Fatalf("registered tool %d: %+v", i, tool)
		}
	}

	// A restart (or a second replica) publishes the same list: JetStream
	// drops the copy.
	r.Close()
	h.registry(testConfig())
	if regs := system[*protocol.ToolRegistration](h); len(regs) != 1 {
		t.Fatalf("%d registrations after a restart, want 1", len(regs))
	}
}

func TestRegistryEnabledFlags(t *testing.T) {
	h := newHarness(t)
	// Stored before the start (persistence wrote them from earlier envelopes).
	h.exec(`INSERT INTO alicia_tools (name, enabled) VALUES ('web_search', false), ('calculator', true)`)
	r := h.registry(testConfig())
	ctx := testContext(t)
	if got := names(r.Available(ctx)); !reflect.DeepEqual(got, []string{"calculator", "memory_query"}) {
		t.Fatalf("Available = %v", got)
	}
	_, err := r.Call(ctx, "web_search", tools.Invocation{}, map[string]any{"query": "go"})
	if !errors.Is(err, tools.ErrUnknownTool) || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("disabled tool: err = %v", err)
	}

	// Settings published afterwards apply without a restart.
	h.publish(&protocol.ToolSetting{Name: "web_search", Enabled: true})
	h.publish(&protocol.ToolSetting{Name: "calculator", Enabled: false})
	testkit.Eventually(t, 5*time.Second, func() bool {
		return reflect.DeepEqual(names(r.Available(ctx)), []string{"memory_query", "web_search"})
	}, "settings applied")
	if _, err := r.Call(ctx, "calculator", tools.Invocation{}, map[string]any{"expression": "1+1"}); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("calculator after disabling: err = %v", err)
	}
	if spec, ok := r.Spec("calculator"); !ok || spec.Name != "calculator" {
		t.Fatalf("Spec of a disabled tool: %+v %v", spec, ok)
	}
}

// A setting published before the start that persistence has not applied
// yet: the start asks persistence to catch up with the SYSTEM stream before
// it reads alicia_tools. The fake persistence stores the row only when asked.
func TestRegistryWaitsForPersistence(t *testing.T) {
	h := newHarness(t)
	h.publish(&protocol.ToolSetting{Name: "memory_query", Enabled: false})
	askedc := make(chan rpc.AppliedRequest, 1)
	svc, err := micro.AddService(h.nc, micro.Config{
		Name: "alicia-persistence", Version: "0.0.1",
		Endpoint: &micro.EndpointConfig{Subject: rpc.AppliedSubject, Handler: micro.HandlerFunc(func(req micro.Request) {
			var asked rpc.AppliedRequest
			if !rpc.Decode(req, &asked) {
				return
			}
			askedc <- asked
			h.exec(`INSERT INTO alicia_tools (name, enabled) VALUES ('memory_query', false)`)
			rpc.Respond(req, rpc.AppliedResponse{Applied: asked.Sequence})
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	r := h.registry(testConfig())
	var asked rpc.AppliedRequest
	select {
	case asked = <-askedc:
	default:
		t.Fatal("the start did not ask persistence to catch up")
	}
	if asked.Stream != bus.StreamSystem || asked.Sequence != 1 {
		t.Fatalf("persistence.applied asked for %+v", asked)
	}
	if got := names(r.Available(testContext(t))); slices.Contains(got, "memory_query") {
		t.Fatalf("Available = %v", got)
	}
}

func TestRegistryCall(t *testing.T) {
	h := newHarness(t)
	ddg, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_results.html")
	cfg := testConfig()
	cfg.WebSearchURL = srv.URL
	r := h.registry(cfg)
	for _, tc := range []struct {
		name    string
		tool    string
		args    map[string]any
		is      error
		message string
	}{
		{"unknown tool", "shell", map[string]any{}, tools.ErrUnknownTool, `unknown tool: "shell"`},
		{"missing required argument", "calculator", map[string]any{}, tools.ErrInvalidParameters, "expression"},
		{"argument of the wrong type", "calculator", map[string]any{"expression": 3.0}, tools.ErrInvalidParameters, "expression"},
		{"unexpected argument", "calculator", map[string]any{"expression": "1", "mode": "x"}, tools.ErrInvalidParameters, "mode"},
		{"limit over the maximum", "web_search", map[string]any{"query": "go", "limit": 11}, tools.ErrInvalidParameters, "limit: maximum: 11 is greater than 10"},
		{"limit as a string", "web_search", map[string]any{"query": "go", "limit": "5"}, tools.ErrInvalidParameters, "limit"},
		{"tool rejects the expression", "calculator", map[string]any{"expression": "2 +"}, tools.ErrInvalidParameters, "unexpected end of expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Call(testContext(t), tc.tool, tools.Invocation{}, tc.args)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.is, tc.message)
			}
		})
	}
	t.Run("success", func(t *testing.T) {
		// Integers as a JSON decoder with UseNumber or a Go caller gives them.
		got, err := r.Call(testContext(t), "web_search", tools.Invocation{}, map[string]any{"query": "golang", "limit": 2})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.(map[string]any)["results"].([]any)); n != 2 {
			t.Fatalf("%d results", n)
		}
		got, err = r.Call(testContext(t), "calculator", tools.Invocation{}, map[string]any{"expression": "6*7"})
		if err != nil || got.(map[string]any)["result"] != 42.0 {
			t.Fatalf("calculator: %v %v", got, err)
		}
	})

	hang := make(chan struct{})
	defer close(hang)
	ddg.mu.Lock()
	ddg.hang = hang
	ddg.mu.Unlock()
	t.Run("timeout", func(t *testing.T) {
		cfg := cfg
		cfg.Timeouts = map[string]time.Duration{"web_search": 150 * time.Millisecond}
		r := h.registry(cfg)
		if d := r.Timeout("web_search"); d != 150*time.Millisecond {
			t.Fatalf("Timeout = %s", d)
		}
		if d := r.Timeout("calculator"); d != cfg.Timeout {
			t.Fatalf("Timeout(calculator) = %s", d)
		}
		start := time.Now()
		_, err := r.Call(testContext(t), "web_search", tools.Invocation{}, map[string]any{"query": "go"})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "web_search did not finish within 150ms") {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("took %s", d)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testContext(t))
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := r.Call(ctx, "web_search", tools.Invocation{}, map[string]any{"query": "go"})
		if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestConfigFrom(t *testing.T) {
	t.Setenv("ALICIA_TOOL_TIMEOUT", "12s")
	t.Setenv("ALICIA_TOOL_TIMEOUTS", "web_search=5s, mcp_fs_read=1m")
	t.Setenv("ALICIA_WEB_SEARCH_URL", "http://127.0.0.1:9999")
	t.Setenv("ALICIA_MCP_PING_INTERVAL", "3s")
	c, err := tools.ConfigFrom(config.Environ())
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 12*time.Second || c.TimeoutOf("web_search") != 5*time.Second || c.TimeoutOf("mcp_fs_read") != time.Minute ||
		c.TimeoutOf("calculator") != 12*time.Second || c.WebSearchURL != "http://127.0.0.1:9999" || c.MCPPingInterval != 3*time.Second {
		t.Fatalf("config %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	t.Setenv("ALICIA_TOOL_TIMEOUTS", "web_search")
	t.Setenv("ALICIA_MCP_BACKOFF_MIN", "soon")
	if _, err := tools.ConfigFrom(config.Environ()); err == nil || !strings.Contains(err.Error(), "ALICIA_TOOL_TIMEOUTS") || !strings.Contains(err.Error(), "ALICIA_MCP_BACKOFF_MIN") {
		t.Fatalf("err = %v", err)
	}
	bad := tools.DefaultConfig()
	bad.Timeout = 0
	bad.WebSearchURL = "ftp://x"
	err = bad.Validate()
	if !errors.Is(err, tools.ErrInvalidConfig) || !strings.Contains(err.Error(), "ALICIA_TOOL_TIMEOUT") || !strings.Contains(err.Error(), "ALICIA_WEB_SEARCH_URL") {
		t.Fatalf("Validate: %v", err)
	}
}

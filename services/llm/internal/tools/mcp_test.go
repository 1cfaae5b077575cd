package tools_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

const wait = 10 * time.Second

// statuses are the MCPServerStatus values published for server, in order.
func statuses(h *harness, server string) []protocol.MCPServerStatus {
	var out []protocol.MCPServerStatus
	for _, s := range system[*protocol.MCPServerStatus](h) {
		if s.Name == server {
			out = append(out, *s)
		}
	}
	return out
}

func lastStatus(h *harness, server string) (protocol.MCPServerStatus, bool) {
	all := statuses(h, server)
	if len(all) == 0 {
		return protocol.MCPServerStatus{}, false
	}
	return all[len(all)-1], true
}

func countStatus(h *harness, server string, st protocol.MCPServerStatusStatus) int {
	n := 0
	for _, s := range statuses(h, server) {
		if s.Status == st {
			n++
		}
	}
	return n
}

// registrations are the ToolRegistration tool lists published for source.
func registrations(h *harness, source string) [][]string {
	var out [][]string
	for _, r := range system[*protocol.ToolRegistration](h) {
		if r.Source == source {
			var ns []string
			for _, t := range r.Tools {
				ns = append(ns, t.Name)
			}
			out = append(out, ns)
		}
	}
	return out
}

func available(r *tools.Registry, name string) bool {
	return slices.ContainsFunc(r.Available(context.Background()), func(s tools.Spec) bool { return s.Name == name })
}

func TestMCPStreamableHTTP(t *testing.T) {
	h := newHarness(t)
	ts, _ := httpMCPServer(t, "")
	h.exec(`INSERT INTO alicia_mcp_servers (name, transport, url) VALUES ('web', 'http', $1)`, ts.URL)
	cfg := testConfig()
	cfg.Timeouts = map[string]time.Duration{"mcp_web_slow": 200 * time.Millisecond}
	r := h.registry(cfg)
	ctx := testContext(t)

	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_web_echo") }, "MCP tools listed")
	want := []string{"calculator", "mcp_web_echo", "mcp_web_fail", "mcp_web_slow", "memory_query", "web_search"}
	if got := names(r.Available(ctx)); !slices.Equal(got, want) {
		t.Fatalf("Available = %v, want %v", got, want)
	}
	spec, _ := r.Spec("mcp_web_echo")
	props, _ := spec.Parameters["properties"].(map[string]any)
	if spec.Source != "mcp:web" || spec.Description != "Echo the text back." || props["text"] == nil {
		t.Fatalf("spec %+v", spec)
	}
	if regs := registrations(h, "mcp:web"); len(regs) != 1 || !slices.Equal(regs[0], []string{"mcp_web_echo", "mcp_web_fail", "mcp_web_slow"}) {
		t.Fatalf("registrations %v", regs)
	}
	for _, reg := range system[*protocol.ToolRegistration](h) {
		if reg.Source == "mcp:web" && (reg.Tools[0].MCPServer == nil || *reg.Tools[0].MCPServer != "web") {
			t.Fatalf("registered tool without its server: %+v", reg.Tools[0])
		}
	}
	if st, _ := lastStatus(h, "web"); st.Status != protocol.MCPServerStatusStatusConnected {
		t.Fatalf("status %+v", st)
	}
	if s := r.Servers(); len(s) != 1 || s[0].Name != "web" || s[0].Status != "connected" {
		t.Fatalf("Servers = %+v", s)
	}

	t.Run("calls", func(t *testing.T) {
		got, err := r.Call(ctx, "mcp_web_echo", tools.Invocation{}, map[string]any{"text": "hello"})
		if err != nil || got != "echo: hello" {
			t.Fatalf("echo: %v, %v", got, err)
		}
		_, err = r.Call(ctx, "mcp_web_fail", tools.Invocation{}, map[string]any{})
		if !errors.Is(err, tools.ErrToolFailed) || !strings.Contains(err.Error(), "the disk is full") {
			t.Fatalf("isError result: err = %v", err)
		}
		_, err = r.Call(ctx, "mcp_web_echo", tools.Invocation{}, map[string]any{"text": 5})
		if !errors.Is(err, tools.ErrInvalidParameters) {
			t.Fatalf("bad arguments: err = %v", err)
		}
		start := time.Now()
		_, err = r.Call(ctx, "mcp_web_slow", tools.Invocation{}, map[string]any{})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			t.Fatalf("slow tool: err = %v after %s", err, time.Since(start))
		}
		// The timeout did not break the session.
		if got, err := r.Call(ctx, "mcp_web_echo", tools.Invocation{}, map[string]any{"text": "again"}); err != nil || got != "echo: again" {
			t.Fatalf("echo after a timeout: %v, %v", got, err)
		}
	})

	// The server goes away: its tools leave Available, calls say why, and the
	// status carries the error.
	addr := ts.Listener.Addr().String()
	ts.CloseClientConnections()
	ts.Close()
	testkit.Eventually(t, wait, func() bool {
		st, _ := lastStatus(h, "web")
		return st.Status == protocol.MCPServerStatusStatusError && st.LastError != nil && *st.LastError != ""
	}, "error status after the server went away")
	if available(r, "mcp_web_echo") {
		t.Fatal("tool of a lost server still available")
	}
	_, err := r.Call(ctx, "mcp_web_echo", tools.Invocation{}, map[string]any{"text": "x"})
	if !errors.Is(err, tools.ErrServerUnavailable) || !strings.Contains(err.Error(), `"web"`) {
		t.Fatalf("call to a lost server: err = %v", err)
	}

	// It comes back where it was: reconnected with backoff.
	httpMCPServer(t, addr)
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_web_echo") }, "reconnected")
	if got, err := r.Call(ctx, "mcp_web_echo", tools.Invocation{}, map[string]any{"text": "back"}); err != nil || got != "echo: back" {
		t.Fatalf("echo after reconnecting: %v, %v", got, err)
	}
	if n := countStatus(h, "web", protocol.MCPServerStatusStatusConnected); n != 2 {
		t.Fatalf("%d connected statuses, want 2", n)
	}
	// Same tools again: nothing new to register.
	if regs := registrations(h, "mcp:web"); len(regs) != 1 {
		t.Fatalf("registrations after reconnecting: %v", regs)
	}

	// Deleted through the gateway: disconnected, tools gone here and in alicia_tools.
	h.publish(&protocol.MCPServerConfig{Name: "web", Action: protocol.MCPServerConfigActionDelete})
	testkit.Eventually(t, wait, func() bool {
		st, _ := lastStatus(h, "web")
		return st.Status == protocol.MCPServerStatusStatusDisconnected
	}, "disconnected after delete")
	if _, err := r.Call(ctx, "mcp_web_echo", tools.Invocation{}, map[string]any{"text": "x"}); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("call after delete: err = %v", err)
	}
	if got := names(r.Available(ctx)); !slices.Equal(got, builtinNames) {
		t.Fatalf("Available after delete = %v", got)
	}
	testkit.Eventually(t, wait, func() bool {
		regs := registrations(h, "mcp:web")
		return len(regs) == 2 && len(regs[1]) == 0
	}, "empty registration after delete")
	if s := r.Servers(); len(s) != 0 {
		t.Fatalf("Servers after delete = %+v", s)
	}
}

func TestMCPStdio(t *testing.T) {
	h := newHarness(t)
	t.Setenv("ALICIA_TEST_SECRET", "not for MCP servers")
	pids := t.TempDir()
	cfg := testConfig()
	cfg.MCPServersFile = operatorFile(t, "", map[string]string{pidDirEnv: pids, "GREETING": "bonjour"}, "local_box")
	r := h.registry(cfg)
	ctx := testContext(t)
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_local_box_echo") }, "stdio server connected")
	if got, err := r.Call(ctx, "mcp_local_box_echo", tools.Invocation{}, map[string]any{"text": "hi"}); err != nil || got != "echo: hi" {
		t.Fatalf("echo: %v, %v", got, err)
	}
	for _, tc := range []struct{ name, want string }{
		{"GREETING", "bonjour"},
		{"ALICIA_TEST_SECRET", "<unset>"},
		{"PATH", os.Getenv("PATH")},
	} {
		got, err := r.Call(ctx, "mcp_local_box_getenv", tools.Invocation{}, map[string]any{"name": tc.name})
		if err != nil || got != tc.want {
			t.Fatalf("server's %s = %v (%v), want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := r.Call(ctx, "mcp_local_box_fail", tools.Invocation{}, nil); !errors.Is(err, tools.ErrToolFailed) || !strings.Contains(err.Error(), "the disk is full") {
		t.Fatalf("fail: %v", err)
	}

	// The process dies: the error says what it last wrote, and a new
	// process is started.
	if _, err := r.Call(ctx, "mcp_local_box_exit", tools.Invocation{}, nil); err == nil {
		t.Fatal("exit returned no error")
	}
	testkit.Eventually(t, wait, func() bool {
		for _, st := range statuses(h, "local_box") {
			if st.Status == protocol.MCPServerStatusStatusError && st.LastError != nil && strings.Contains(*st.LastError, "fatal: asked to exit") {
				return true
			}
		}
		return false
	}, "error status with the server's stderr")
	testkit.Eventually(t, wait, func() bool {
		return countStatus(h, "local_box", protocol.MCPServerStatusStatusConnected) == 2 && available(r, "mcp_local_box_echo")
	}, "restarted")
	if got, err := r.Call(ctx, "mcp_local_box_echo", tools.Invocation{}, map[string]any{"text": "again"}); err != nil || got != "echo: again" {
		t.Fatalf("echo after the restart: %v, %v", got, err)
	}

	// Removed from the operator's file: the process is stopped.
	operatorFile(t, cfg.MCPServersFile, nil)
	testkit.Eventually(t, wait, func() bool {
		st, _ := lastStatus(h, "local_box")
		return st.Status == protocol.MCPServerStatusStatusDisconnected && !available(r, "mcp_local_box_echo")
	}, "disconnected after delete")
	entries, err := os.ReadDir(pids)
	if err != nil || len(entries) != 2 {
		t.Fatalf("pid files: %v %v", entries, err)
	}
	testkit.Eventually(t, wait, func() bool {
		for _, e := range entries {
			pid, _ := strconv.Atoi(e.Name())
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return true
	}, "server processes gone")
}

func TestMCPConfigChanges(t *testing.T) {
	h := newHarness(t)
	r := h.registry(testConfig())
	upsert := func(url string, enabled bool) {
		h.publish(&protocol.MCPServerConfig{Name: "svc", Action: protocol.MCPServerConfigActionUpsert, Url: protocol.Ptr(url), Enabled: protocol.Ptr(enabled)})
	}
	// Nothing listens there: errors, retried with backoff.
	upsert("http://127.0.0.1:1/mcp", true)
	testkit.Eventually(t, wait, func() bool { return countStatus(h, "svc", protocol.MCPServerStatusStatusError) >= 2 }, "retried")
	for _, st := range statuses(h, "svc") {
		if st.Status == protocol.MCPServerStatusStatusError && (st.LastError == nil || !strings.Contains(*st.LastError, "connect")) {
			t.Fatalf("status %+v", st)
		}
	}
	if s := r.Servers(); len(s) != 1 || s[0].LastError == "" {
		t.Fatalf("Servers = %+v", s)
	}

	// Pointed at a live server: connected at once, without waiting out the backoff.
	ts, srv := httpMCPServer(t, "")
	upsert(ts.URL, true)
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_svc_echo") }, "connected after the change")

	// The server adds a tool and says so: listed and registered again.
	mcp.AddTool(srv, &mcp.Tool{Name: "late", Description: "Added later."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil, nil
		})
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_svc_late") }, "new tool listed")
	if got, err := r.Call(testContext(t), "mcp_svc_late", tools.Invocation{}, nil); err != nil || got != "here" {
		t.Fatalf("late: %v, %v", got, err)
	}
	testkit.Eventually(t, wait, func() bool {
		regs := registrations(h, "mcp:svc")
		return len(regs) == 2 && slices.Contains(regs[1], "mcp_svc_late")
	}, "registered again")

	// Disabled: disconnected, tools gone until enabled again.
	upsert(ts.URL, false)
	testkit.Eventually(t, wait, func() bool {
		st, _ := lastStatus(h, "svc")
		return st.Status == protocol.MCPServerStatusStatusDisconnected && !available(r, "mcp_svc_echo")
	}, "disabled")
	upsert(ts.URL, true)
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_svc_echo") }, "enabled again")

	// A configuration that cannot work is refused with an error status.
	h.publish(&protocol.MCPServerConfig{Name: "broken", Action: protocol.MCPServerConfigActionUpsert, Transport: protocol.Ptr(protocol.MCPServerConfigTransportHttp), Url: protocol.Ptr("ftp://x")})
	testkit.Eventually(t, wait, func() bool {
		st, ok := lastStatus(h, "broken")
		return ok && st.Status == protocol.MCPServerStatusStatusError && strings.Contains(*st.LastError, "http(s) URL")
	}, "refused configuration")
}

func TestMCPStdioTurnedOff(t *testing.T) {
	h := newHarness(t)
	h.exec(`INSERT INTO alicia_mcp_servers (name, transport, command) VALUES ('local', 'stdio', $1)`, os.Args[0])
	cfg := testConfig()
	cfg.MCPStdio = false
	r := h.registry(cfg)
	st, ok := lastStatus(h, "local")
	if !ok || st.Status != protocol.MCPServerStatusStatusError || !strings.Contains(*st.LastError, "ALICIA_MCP_STDIO") {
		t.Fatalf("status %+v", st)
	}
	if s := r.Servers(); len(s) != 0 {
		t.Fatalf("Servers = %+v", s)
	}
}

func TestMCPToolName(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5)
	for _, tc := range []struct{ server, tool, want string }{
		{"github", "create_issue", "mcp_github_create_issue"},
		{"my server", "files.read", "mcp_my_server_files_read"},
		{"fs", "lire-fichier", "mcp_fs_lire-fichier"},
		{"été", "ok", "mcp__t__ok"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := tools.MCPToolName(tc.server, tc.tool); got != tc.want {
				t.Fatalf("MCPToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
			}
		})
	}
	t.Run("long names are cut and stay apart", func(t *testing.T) {
		a, b := tools.MCPToolName("srv", long+"a"), tools.MCPToolName("srv", long+"b")
		if len(a) != tools.MaxToolNameLength || len(b) != tools.MaxToolNameLength || a == b || !strings.HasPrefix(a, "mcp_srv_very_long") {
			t.Fatalf("%q %q", a, b)
		}
	})
}

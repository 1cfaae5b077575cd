package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway"
)

// TestInstallationWritesAreForAdministrators: switching tools and adding,
// replacing, enabling or removing MCP servers is an administrator's;
// everyone else gets 403 and changes nothing.
func TestInstallationWritesAreForAdministrators(t *testing.T) {
	s := newStack(t)
	s.publish(t, "", protocol.New("", &protocol.ToolRegistration{Source: "builtin", Tools: []protocol.ToolRegistrationToolsElem{{Name: "calculator"}}}))
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"tool off", "PATCH", "/v1/tools/calculator", map[string]any{"enabled": false}},
		{"stdio server", "PUT", "/v1/mcp-servers/pwn", map[string]any{"transport": "stdio", "command": "sh", "args": []string{"-c", "id >&2; exit 1"}}},
		{"http server", "PUT", "/v1/mcp-servers/web", map[string]any{"transport": "http", "url": "https://93.184.215.14/mcp"}},
		{"server on/off", "PATCH", "/v1/mcp-servers/web", map[string]any{"enabled": false}},
		{"server removal", "DELETE", "/v1/mcp-servers/web", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := s.call(t, aliceKey, c.method, c.path, c.body).wantError(http.StatusForbidden)
			if !strings.Contains(msg, "administrators") {
				t.Fatalf("403 message %q does not say who may", msg)
			}
		})
	}
	var tools struct {
		Tools []toolJSON `json:"tools"`
	}
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, &tools)
	if len(tools.Tools) != 1 || !tools.Tools[0].Enabled {
		t.Fatalf("a user's refused PATCH changed the tool: %+v", tools)
	}
	var servers struct {
		Servers []mcpJSON `json:"servers"`
	}
	s.call(t, adminKey, "GET", "/v1/mcp-servers", nil).want(http.StatusOK, &servers)
	if len(servers.Servers) != 0 {
		t.Fatalf("a user's refused PUT created %+v", servers)
	}

	// An administrator may not create a stdio server either: 400.
	msg := s.call(t, adminKey, "PUT", "/v1/mcp-servers/pwn", map[string]any{"transport": "stdio", "command": "sh", "args": []string{"-c", "id"}}).wantError(http.StatusBadRequest)
	if !strings.Contains(msg, "ALICIA_MCP_SERVERS_FILE") {
		t.Fatalf("400 message %q does not say where stdio servers come from", msg)
	}
	var tool toolJSON
	s.call(t, adminKey, "PATCH", "/v1/tools/calculator", map[string]any{"enabled": false}).want(http.StatusOK, &tool)
	if tool.Enabled {
		t.Fatalf("an administrator's PATCH did not switch the tool off: %+v", tool)
	}
}

// TestOperatorStdioServerThroughTheAPI: a stdio server the llm published
// from the operator's file can be enabled and disabled by an administrator,
// never replaced, turned into an http server or removed; a user sees its
// name and status only.
func TestOperatorStdioServerThroughTheAPI(t *testing.T) {
	s := newStack(t)
	transport := protocol.MCPServerConfigTransportStdio
	s.publish(t, "",
		protocol.New("", &protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionUpsert, Name: "files", Transport: &transport,
			Command: protocol.Ptr("/opt/mcp/files"), Args: []string{"--root", "/srv/private"}}),
		protocol.New("", &protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusError,
			LastError: protocol.Ptr("connect: dial tcp 10.1.2.3:5432: refused (stderr: token=abc)")}),
	)
	for _, c := range []struct {
		name, method string
		body         any
	}{
		{"replace", "PUT", map[string]any{"transport": "stdio", "command": "sh"}},
		{"into http", "PUT", map[string]any{"transport": "http", "url": "https://93.184.215.14/mcp"}},
		{"remove", "DELETE", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.call(t, adminKey, c.method, "/v1/mcp-servers/files", c.body).wantError(http.StatusBadRequest)
		})
	}
	var srv mcpJSON
	s.call(t, aliceKey, "PATCH", "/v1/mcp-servers/files", map[string]any{"enabled": false}).wantError(http.StatusForbidden)
	s.call(t, adminKey, "PATCH", "/v1/mcp-servers/files", map[string]any{"enabled": false}).want(http.StatusOK, &srv)
	if srv.Enabled || srv.Transport != "stdio" || srv.Command == nil || *srv.Command != "/opt/mcp/files" || len(srv.Args) != 2 {
		t.Fatalf("disabled %+v", srv)
	}
	s.call(t, adminKey, "PATCH", "/v1/mcp-servers/files", map[string]any{"enabled": true}).want(http.StatusOK, &srv)
	if !srv.Enabled || *srv.Command != "/opt/mcp/files" {
		t.Fatalf("enabled %+v", srv)
	}

	// What each one sees.
	r := s.call(t, aliceKey, "GET", "/v1/mcp-servers", nil).want(http.StatusOK, nil)
	for _, secret := range []string{"/opt/mcp", "/srv/private", "10.1.2.3", "token=abc", "command", "args", "lastError", "url"} {
		if strings.Contains(string(r.body), secret) {
			t.Errorf("a user's GET /v1/mcp-servers shows %q: %s", secret, r.body)
		}
	}
	var servers struct {
		Servers []mcpJSON `json:"servers"`
	}
	json.Unmarshal(r.body, &servers)
	if len(servers.Servers) != 1 || servers.Servers[0].Name != "files" || servers.Servers[0].Status != "error" || !servers.Servers[0].Enabled {
		t.Fatalf("a user's view %s", r.body)
	}
	s.call(t, adminKey, "GET", "/v1/mcp-servers", nil).want(http.StatusOK, &servers)
	if got := servers.Servers[0]; got.Command == nil || got.LastError == nil || !strings.Contains(*got.LastError, "10.1.2.3") {
		t.Fatalf("an administrator's view %+v", got)
	}
}

// TestServerInfoForUsers: a user's server-info and WebSocket ServerInfo
// name the engines and say whether they are usable, without URLs or error
// texts; an administrator's has them.
func TestServerInfoForUsers(t *testing.T) {
	down := "http://" + testkit.FreeAddr(t) + "/v1" // nothing listens there
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.LLM.URL, c.ASR.URL, c.TTS.URL = down, down, down }
	})
	host := strings.TrimPrefix(strings.TrimSuffix(down, "/v1"), "http://")
	r := s.call(t, aliceKey, "GET", "/v1/server-info", nil).want(http.StatusOK, nil)
	for _, secret := range []string{host, "127.0.0.1", `"url"`, `"error"`, "refused"} {
		if strings.Contains(string(r.body), secret) {
			t.Errorf("a user's server-info shows %q: %s", secret, r.body)
		}
	}
	var info serverInfoJSON
	json.Unmarshal(r.body, &info)
	if m := info.Models["llm"]; m.Name == "" || m.Reachable || m.Engine != "openai" {
		t.Fatalf("a user's llm %+v", m)
	}
	s.call(t, adminKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	if m := info.Models["llm"]; m.URL != down || m.Error == "" {
		t.Fatalf("an administrator's llm %+v", m)
	}

	ws := s.dial(t, aliceKey)
	b, _ := json.Marshal(ws.info.Body)
	if strings.Contains(string(b), host) || strings.Contains(string(b), "refused") {
		t.Fatalf("a user's ServerInfo envelope shows internals: %s", b)
	}
	if si, ok := ws.info.Body.(*protocol.ServerInfo); !ok || si.Models.LLM.Name == "" || si.Models.LLM.Reachable {
		t.Fatalf("ServerInfo %s", b)
	}
}

// TestMCPServerURLMustBePublic: the early check of an http server's host.
func TestMCPServerURLMustBePublic(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.MCPAllowedHosts = []string{"127.0.0.5"} }
	})
	for _, u := range []string{
		"http://127.0.0.1:8080/mcp", "http://[::1]/mcp", "http://10.0.0.8/mcp", "http://172.16.1.1/mcp", "http://192.168.1.10/mcp",
		"http://169.254.169.254/latest/meta-data", "http://[fc00::1]/mcp", "http://100.64.0.1/mcp", "http://0.0.0.0:80/mcp",
		"http://localhost:8222/mcp", "http://[::ffff:127.0.0.1]/mcp",
	} {
		t.Run(u, func(t *testing.T) {
			s.call(t, adminKey, "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "http", "url": u}).wantError(http.StatusBadRequest)
		})
	}
	var srv mcpJSON
	s.call(t, adminKey, "PUT", "/v1/mcp-servers/allowed", map[string]any{"transport": "http", "url": "http://127.0.0.5:9/mcp"}).want(http.StatusCreated, &srv)
	s.call(t, adminKey, "PUT", "/v1/mcp-servers/public", map[string]any{"transport": "http", "url": "https://93.184.215.14/mcp"}).want(http.StatusCreated, &srv)
}

// TestTokenQueryOnlyOnWebSocket: ?token= authenticates /v1/ws only.
func TestTokenQueryOnlyOnWebSocket(t *testing.T) {
	s := newStack(t)
	s.dial(t, aliceKey) // /v1/ws?token=
	for _, path := range []string{"/v1/conversations", "/v1/server-info", "/v1/tools"} {
		r := s.call(t, "", "GET", path+"?token="+url.QueryEscape(aliceKey), nil)
		if msg := r.wantError(http.StatusUnauthorized); !strings.Contains(msg, "Bearer") {
			t.Errorf("GET %s?token= message %q", path, msg)
		}
	}
}

// TestFailedAuthenticationsAreThrottled: failures of a key from one
// address use up that key's budget there (429 with Retry-After);
// successes never do, and other keys are judged as usual.
func TestFailedAuthenticationsAreThrottled(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.AuthFailureBurst, c.AuthFailuresPerMinute = 3, 1 }
	})
	for range 10 {
		s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, nil)
	}
	for range 3 {
		s.call(t, "wrong-key-0123456789", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	}
	r := s.call(t, "wrong-key-0123456789", "GET", "/v1/tools", nil)
	r.wantError(http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.header)
	}
	s.call(t, "", "GET", "/v1/ws?token=wrong-key-0123456789", nil).wantError(http.StatusUnauthorized) // ?token= only on an upgrade
	s.call(t, "another-wrong-key-0123", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, nil)
}

// TestReadyzHidesInternals: /readyz names what is down, not why.
func TestReadyzHidesInternals(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.noPersistence = true })
	get := func() (int, string) {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK || body != "ready" {
		t.Fatalf("readyz %d %q", code, body)
	}
	// Postgres loses the gateway's database.
	dbURL, err := url.Parse(s.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(dbURL.Path, "/")
	dbURL.Path = "/postgres"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	s.pool.Close()
	if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	testkit.Eventually(t, 10*time.Second, func() bool { code, body = get(); return code == http.StatusServiceUnavailable }, "readyz stayed ready")
	if body != "postgres: unavailable" {
		t.Fatalf("readyz body %q, want %q", body, "postgres: unavailable")
	}
}

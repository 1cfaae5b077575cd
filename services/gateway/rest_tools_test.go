package gateway_test

import (
	"net/http"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway"
)

type toolJSON struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Enabled     bool           `json:"enabled"`
	Source      string         `json:"source"`
}

type mcpJSON struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	Command   *string  `json:"command"`
	Args      []string `json:"args"`
	URL       *string  `json:"url"`
	Enabled   bool     `json:"enabled"`
	Status    string   `json:"status"`
	LastError *string  `json:"lastError"`
}

func TestToolsAndMCPServers(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.MCPAllowedHosts = []string{"127.0.0.1"} }
	})
	params := protocol.ToolRegistrationToolsElemParameters{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}}
	s.publish(t, "", protocol.New("", &protocol.ToolRegistration{Source: "builtin", Tools: []protocol.ToolRegistrationToolsElem{
		{Name: "calculator", Description: protocol.Ptr("Evaluates arithmetic"), Parameters: params},
		{Name: "web_search", Description: protocol.Ptr("Searches the web")},
	}}))
	var tools struct {
		Tools []toolJSON `json:"tools"`
	}
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, &tools)
	if len(tools.Tools) != 2 || tools.Tools[0].Name != "calculator" || tools.Tools[0].Source != "builtin" || !tools.Tools[0].Enabled ||
		tools.Tools[0].Description != "Evaluates arithmetic" || tools.Tools[0].Parameters["type"] != "object" {
		t.Fatalf("tools %+v", tools)
	}

	var tool toolJSON
	s.call(t, adminKey, "PATCH", "/v1/tools/calculator", map[string]any{"enabled": false}).want(http.StatusOK, &tool)
	if tool.Name != "calculator" || tool.Enabled {
		t.Fatalf("disabled %+v", tool)
	}
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, &tools)
	if tools.Tools[0].Enabled || !tools.Tools[1].Enabled {
		t.Fatalf("after disable %+v", tools)
	}
	s.call(t, adminKey, "PATCH", "/v1/tools/calculator", map[string]any{"enabled": true}).want(http.StatusOK, &tool)
	if !tool.Enabled {
		t.Fatalf("enabled %+v", tool)
	}

	// MCP servers over HTTP: created, replaced, their tools and status, removed.
	var srv mcpJSON
	s.call(t, adminKey, "PUT", "/v1/mcp-servers/files", map[string]any{"transport": "http", "url": "https://93.184.215.14/mcp"}).want(http.StatusCreated, &srv)
	if srv.Name != "files" || srv.Transport != "http" || *srv.URL != "https://93.184.215.14/mcp" || !srv.Enabled || srv.Status != "unknown" {
		t.Fatalf("created %+v", srv)
	}
	srv = mcpJSON{}
	// 127.0.0.1 is in the stack's ALICIA_MCP_ALLOWED_HOSTS.
	s.call(t, adminKey, "PUT", "/v1/mcp-servers/files", map[string]any{"transport": "http", "url": "http://127.0.0.1:9/mcp", "enabled": false}).want(http.StatusOK, &srv)
	if srv.Transport != "http" || srv.URL == nil || *srv.URL != "http://127.0.0.1:9/mcp" || srv.Command != nil || srv.Enabled {
		t.Fatalf("replaced %+v", srv)
	}
	s.publish(t, "",
		protocol.New("", &protocol.ToolRegistration{Source: "mcp:files", Tools: []protocol.ToolRegistrationToolsElem{{Name: "mcp_files_read", MCPServer: protocol.Ptr("files")}}}),
		protocol.New("", &protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusError, LastError: protocol.Ptr("connection refused")}),
	)
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, &tools)
	if len(tools.Tools) != 3 || tools.Tools[1].Name != "mcp_files_read" || tools.Tools[1].Source != "mcp:files" {
		t.Fatalf("tools with MCP %+v", tools)
	}
	var servers struct {
		Servers []mcpJSON `json:"servers"`
	}
	s.call(t, adminKey, "GET", "/v1/mcp-servers", nil).want(http.StatusOK, &servers)
	if len(servers.Servers) != 1 || servers.Servers[0].Status != "error" || *servers.Servers[0].LastError != "connection refused" {
		t.Fatalf("servers %+v", servers)
	}
	var info serverInfoJSON
	s.call(t, aliceKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	if len(info.MCPServers) != 1 || info.MCPServers[0].Name != "files" || info.MCPServers[0].Status != "error" {
		t.Fatalf("server-info MCP %+v", info.MCPServers)
	}
	s.call(t, adminKey, "PATCH", "/v1/mcp-servers/files", map[string]any{"enabled": true}).want(http.StatusOK, &srv)
	if !srv.Enabled || *srv.URL != "http://127.0.0.1:9/mcp" {
		t.Fatalf("enabled %+v", srv)
	}

	s.call(t, adminKey, "DELETE", "/v1/mcp-servers/files", nil).want(http.StatusNoContent, nil)
	s.call(t, aliceKey, "GET", "/v1/mcp-servers", nil).want(http.StatusOK, &servers)
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, &tools)
	if len(servers.Servers) != 0 || len(tools.Tools) != 2 {
		t.Fatalf("after delete: %+v %+v", servers, tools)
	}

	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"unknown tool", "PATCH", "/v1/tools/nope", map[string]any{"enabled": true}, 404},
		{"no enabled", "PATCH", "/v1/tools/calculator", map[string]any{}, 400},
		{"enabled not a bool", "PATCH", "/v1/tools/calculator", map[string]any{"enabled": "yes"}, 400},
		{"bad server name", "PUT", "/v1/mcp-servers/no.dots", map[string]any{"transport": "http", "url": "https://93.184.215.14/mcp"}, 400},
		{"bad transport", "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "ftp"}, 400},
		{"stdio", "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "stdio", "command": "x"}, 400},
		{"http without url", "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "http"}, 400},
		{"http with a bad url", "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "http", "url": "file:///etc/passwd"}, 400},
		{"http with a command", "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "http", "url": "http://h/mcp", "command": "x"}, 400},
		{"http with env", "PUT", "/v1/mcp-servers/x", map[string]any{"transport": "http", "url": "https://93.184.215.14/mcp", "env": map[string]string{"A": "1"}}, 400},
		{"patch without enabled", "PATCH", "/v1/mcp-servers/x", map[string]any{}, 400},
		{"patch unknown server", "PATCH", "/v1/mcp-servers/nope", map[string]any{"enabled": true}, 404},
		{"delete unknown server", "DELETE", "/v1/mcp-servers/nope", nil, 404},
	} {
		t.Run(c.name, func(t *testing.T) { s.call(t, adminKey, c.method, c.path, c.body).wantError(c.status) })
	}
}

func TestRateLimitAnswersJSON(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.gateway = func(c *gateway.Config) { c.RateLimit = 1 } })
	// Burst 2 at 1/s: within a few quick requests one is refused.
	limited := false
	for range 6 {
		r := s.call(t, aliceKey, "GET", "/v1/tools", nil)
		if r.status == http.StatusTooManyRequests {
			r.wantError(http.StatusTooManyRequests)
			limited = true
			break
		}
		r.want(http.StatusOK, nil)
	}
	if !limited {
		t.Fatal("never rate limited")
	}
	// Another key has its own budget.
	s.call(t, bobKey, "GET", "/v1/tools", nil).want(http.StatusOK, nil)
}

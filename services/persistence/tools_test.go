package persistence_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// toolState is a tool row as the registry tests read it.
type toolState struct {
	enabled, deleted bool
	server           string // the MCP server's name, "" for builtin
	description      string
}

func readTools(t *testing.T, s *stack) map[string]toolState {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT t.name, t.enabled, t.deleted_at IS NOT NULL, COALESCE(m.name, ''), t.description
		FROM alicia_tools t LEFT JOIN alicia_mcp_servers m ON m.id = t.mcp_server_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]toolState{}
	for rows.Next() {
		var name string
		var st toolState
		if err := rows.Scan(&name, &st.enabled, &st.deleted, &st.server, &st.description); err != nil {
			t.Fatal(err)
		}
		out[name] = st
	}
	return out
}

// serverState is an MCP server row.
type serverState struct {
	transport, command, url, status, lastError, env string
	args                                            string
	enabled, deleted                                bool
}

func readServer(t *testing.T, s *stack, name string) serverState {
	t.Helper()
	var st serverState
	err := s.pool.QueryRow(context.Background(), `SELECT transport::text, COALESCE(command, ''), COALESCE(url, ''), status::text,
		COALESCE(last_error, ''), env::text, array_to_string(args, ' '), enabled, deleted_at IS NOT NULL FROM alicia_mcp_servers WHERE name = $1`, name).
		Scan(&st.transport, &st.command, &st.url, &st.status, &st.lastError, &st.env, &st.args, &st.enabled, &st.deleted)
	if err != nil {
		t.Fatalf("server %s: %v", name, err)
	}
	return st
}

func registration(source string, names ...string) *protocol.ToolRegistration {
	r := &protocol.ToolRegistration{Source: source, Tools: []protocol.ToolRegistrationToolsElem{}}
	for _, n := range names {
		tool := protocol.ToolRegistrationToolsElem{Name: n, Description: ptr("does " + n),
			Parameters: protocol.ToolRegistrationToolsElemParameters{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}}
		if server, ok := strings.CutPrefix(source, "mcp:"); ok {
			tool.MCPServer = &server
		}
		r.Tools = append(r.Tools, tool)
	}
	return r
}

func stdioServer(name string) *protocol.MCPServerConfig {
	return &protocol.MCPServerConfig{Name: name, Action: protocol.MCPServerConfigActionUpsert,
		Transport: ptr(protocol.MCPServerConfigTransportStdio), Command: ptr("mcp-files"), Args: []string{"--root", "/srv"},
		Env: protocol.MCPServerConfigEnv{"LOG": "debug"}}
}

// TestToolRegistry walks the tool registry and the MCP servers through their
// life: each step publishes on alicia.sys, waits with persistence.applied
// and reads the rows back.
func TestToolRegistry(t *testing.T) {
	s := newStack(t)
	s.start()
	builtin := func(enabled, deleted bool, desc string) toolState {
		return toolState{enabled: enabled, deleted: deleted, description: desc}
	}
	files := func(enabled, deleted bool) toolState {
		return toolState{enabled: enabled, deleted: deleted, server: "files", description: "does mcp_files_read"}
	}
	steps := []struct {
		name  string
		body  protocol.Body
		tools map[string]toolState
	}{
		{"builtin tools registered", registration("builtin", "calculator", "web_search"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(true, false, "does web_search")}},
		{"a tool disabled", &protocol.ToolSetting{Name: "web_search", Enabled: false}, map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search")}},
		{"setting an unknown tool changes nothing", &protocol.ToolSetting{Name: "nope", Enabled: false}, map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search")}},
		{"an unlisted builtin tool is removed, a new one added", registration("builtin", "calculator", "memory_query"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, true, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query")}},
		{"a removed tool listed again is revived with its enabled flag", registration("builtin", "calculator", "memory_query", "web_search"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query")}},
		{"tools of an unknown MCP server are not registered", registration("mcp:files", "mcp_files_read"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query")}},
		{"MCP server configured", stdioServer("files"), nil},
		{"MCP tools registered", registration("mcp:files", "mcp_files_read"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query"), "mcp_files_read": files(true, false)}},
		{"an MCP registration leaves builtin tools alone", registration("mcp:files", "mcp_files_read"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query"), "mcp_files_read": files(true, false)}},
		{"MCP tool disabled", &protocol.ToolSetting{Name: "mcp_files_read", Enabled: false}, nil},
		{"MCP server deleted with its tools", &protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionDelete}, map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query"), "mcp_files_read": files(false, true)}},
		{"a late registration of a deleted server registers nothing", registration("mcp:files", "mcp_files_read"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query"), "mcp_files_read": files(false, true)}},
		{"MCP server configured again over http", &protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionUpsert,
			Transport: ptr(protocol.MCPServerConfigTransportHttp), Url: ptr("http://127.0.0.1:9/mcp")}, nil},
		{"its tools come back with their flags", registration("mcp:files", "mcp_files_read"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query"), "mcp_files_read": files(false, false)}},
		{"an empty MCP registration removes its tools only", registration("mcp:files"), map[string]toolState{
			"calculator": builtin(true, false, "does calculator"), "web_search": builtin(false, false, "does web_search"),
			"memory_query": builtin(true, false, "does memory_query"), "mcp_files_read": files(false, true)}},
	}
	for _, st := range steps {
		seq := s.system(st.body, nil)
		s.applied(bus.StreamSystem, seq)
		if st.tools == nil {
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			got := readTools(t, s)
			if len(got) != len(st.tools) {
				t.Fatalf("tools = %+v, want %+v", got, st.tools)
			}
			for name, want := range st.tools {
				if got[name] != want {
					t.Errorf("%s = %+v, want %+v", name, got[name], want)
				}
			}
		})
	}
	var schema string
	if err := s.pool.QueryRow(context.Background(), `SELECT schema::text FROM alicia_tools WHERE name = 'calculator'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if schema != `{"type": "object", "properties": {"x": {"type": "string"}}}` {
		t.Errorf("calculator schema = %s", schema)
	}
}

// TestMCPServerLifecycle: config, status and delete of one server.
func TestMCPServerLifecycle(t *testing.T) {
	s := newStack(t)
	s.start()
	apply := func(body protocol.Body) serverState {
		t.Helper()
		s.applied(bus.StreamSystem, s.system(body, nil))
		return readServer(t, s, "files")
	}
	steps := []struct {
		name string
		body protocol.Body
		want serverState
	}{
		{"created", stdioServer("files"), serverState{transport: "stdio", command: "mcp-files", status: "unknown", env: `{"LOG": "debug"}`, args: "--root /srv", enabled: true}},
		{"connecting", &protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusConnecting},
			serverState{transport: "stdio", command: "mcp-files", status: "connecting", env: `{"LOG": "debug"}`, args: "--root /srv", enabled: true}},
		{"error", &protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusError, LastError: ptr("exec: mcp-files: not found")},
			serverState{transport: "stdio", command: "mcp-files", status: "error", lastError: "exec: mcp-files: not found", env: `{"LOG": "debug"}`, args: "--root /srv", enabled: true}},
		{"disabled, status kept", &protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionUpsert,
			Transport: ptr(protocol.MCPServerConfigTransportStdio), Command: ptr("mcp-files2"), Enabled: ptr(false)},
			serverState{transport: "stdio", command: "mcp-files2", status: "error", lastError: "exec: mcp-files: not found", env: `{}`, enabled: false}},
		{"changed without enabled keeps it", &protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionUpsert,
			Transport: ptr(protocol.MCPServerConfigTransportHttp), Url: ptr("http://127.0.0.1:9/mcp")},
			serverState{transport: "http", url: "http://127.0.0.1:9/mcp", status: "error", lastError: "exec: mcp-files: not found", env: `{}`, enabled: false}},
		{"connected clears the error", &protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusConnected},
			serverState{transport: "http", url: "http://127.0.0.1:9/mcp", status: "connected", env: `{}`, enabled: false}},
		{"deleted", &protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionDelete},
			serverState{transport: "http", url: "http://127.0.0.1:9/mcp", status: "connected", env: `{}`, enabled: false, deleted: true}},
		{"revived: enabled and status start over", stdioServer("files"),
			serverState{transport: "stdio", command: "mcp-files", status: "unknown", env: `{"LOG": "debug"}`, args: "--root /srv", enabled: true}},
	}
	for _, st := range steps {
		got := apply(st.body)
		t.Run(st.name, func(t *testing.T) {
			if got != st.want {
				t.Fatalf("server = %+v, want %+v", got, st.want)
			}
		})
	}
}

// TestBadSystemEnvelopesAreDeadLettered: internal envelopes that cannot be
// stored go to the dead letters with the reason and block nothing.
func TestBadSystemEnvelopesAreDeadLettered(t *testing.T) {
	s := newStack(t)
	s.start()
	cases := []struct {
		name   string
		body   protocol.Body
		reason string
	}{
		{"unknown tool source", registration("plugins", "x"), "neither builtin nor mcp"},
		{"tool of another server", &protocol.ToolRegistration{Source: "mcp:files", Tools: []protocol.ToolRegistrationToolsElem{{Name: "a", MCPServer: ptr("other")}}}, "other than its registration"},
		{"duplicate tool", registration("builtin", "calculator", "calculator"), "lists a tool twice"},
		{"server name", &protocol.MCPServerConfig{Name: "bad name", Action: protocol.MCPServerConfigActionDelete}, "letters, digits"},
		{"stdio without command", &protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionUpsert, Transport: ptr(protocol.MCPServerConfigTransportStdio)}, "needs a command"},
		{"memory embedding of 3 numbers", &protocol.MemoryAction{ID: "ama_bad", Action: protocol.MemoryActionActionCreate, Timestamp: 1,
			Memory: &protocol.MemoryActionMemory{ID: ptr("amem_bad"), Content: "x", Embedding: []float64{1, 2, 3}}}, "3 numbers, the column holds 1024"},
	}
	for _, c := range cases {
		s.system(c.body, nil)
	}
	seq := s.system(registration("builtin", "calculator"), nil)
	s.applied(bus.StreamSystem, seq)
	if n := s.queryInt(`SELECT count(*) FROM alicia_tools WHERE deleted_at IS NULL`); n != 1 {
		t.Fatalf("%d tools, want the one valid registration's", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_memory`); n != 0 {
		t.Fatalf("%d memories written, want none", n)
	}
	dlq, err := s.js.OrderedConsumer(context.Background(), bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if r := m.Headers().Get(bus.HeaderDLQReason); !strings.Contains(r, c.reason) {
				t.Errorf("reason = %q, want it to say %q", r, c.reason)
			}
			if got, want := m.Headers().Get(bus.HeaderDLQSubject), subjects.System(c.body.MessageType()); got != want {
				t.Errorf("subject = %q, want %q", got, want)
			}
		})
	}
}

package tools_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

func stdioUpsert(name, command string, args []string, enabled *bool) *protocol.MCPServerConfig {
	return &protocol.MCPServerConfig{Name: name, Action: protocol.MCPServerConfigActionUpsert,
		Transport: protocol.Ptr(protocol.MCPServerConfigTransportStdio), Command: protocol.Ptr(command), Args: args, Enabled: enabled}
}

// TestOperatorStdioServers: the file's server starts and is announced
// without its env; the bus can enable and disable it but not change or
// remove it, and cannot add a stdio server of its own.
func TestOperatorStdioServers(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig()
	cfg.MCPServersFile = operatorFile(t, "", map[string]string{"FILES_TOKEN": "s3cret"}, "files")
	r := h.registry(cfg)
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_files_echo") }, "the operator's server connected")
	var announced *protocol.MCPServerConfig
	for _, c := range system[*protocol.MCPServerConfig](h) {
		if c.Name == "files" {
			announced = c
		}
	}
	if announced == nil || announced.Command == nil || *announced.Command != os.Args[0] || announced.Enabled != nil || len(announced.Env) != 0 {
		t.Fatalf("announced %+v, want the command without env or enabled", announced)
	}

	// Enabled and disabled from the bus (the gateway's PATCH).
	h.publish(stdioUpsert("files", os.Args[0], []string{"-test.run=^$"}, protocol.Ptr(false)))
	testkit.Eventually(t, wait, func() bool { return !available(r, "mcp_files_echo") }, "disabled")
	h.publish(stdioUpsert("files", os.Args[0], []string{"-test.run=^$"}, protocol.Ptr(true)))
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_files_echo") }, "enabled again")

	// Changed or removed from the bus: refused; the server keeps running
	// the operator's command.
	pwned := t.TempDir() + "/pwned"
	h.publish(stdioUpsert("files", "sh", []string{"-c", "touch " + pwned}, protocol.Ptr(true)))
	h.publish(&protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionDelete})
	// A stdio server the file does not list: refused with an error status.
	h.publish(stdioUpsert("evil", "sh", []string{"-c", "touch " + pwned}, nil))
	testkit.Eventually(t, wait, func() bool {
		st, ok := lastStatus(h, "evil")
		return ok && st.Status == protocol.MCPServerStatusStatusError && strings.Contains(*st.LastError, "ALICIA_MCP_SERVERS_FILE")
	}, "the bus's stdio server refused")
	if _, err := os.Stat(pwned); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a command from the bus ran: %v", err)
	}
	got, err := r.Call(testContext(t), "mcp_files_getenv", tools.Invocation{}, map[string]any{"name": "FILES_TOKEN"})
	if err != nil || got != "s3cret" {
		t.Fatalf("the operator's server after the forgeries: %v %v", got, err)
	}
	for _, s := range r.Servers() {
		if s.Name == "evil" {
			t.Fatalf("a server from the bus runs: %+v", s)
		}
	}

	// The file changes: its new server starts, the removed one stops and
	// its removal is announced.
	operatorFile(t, cfg.MCPServersFile, nil, "more")
	testkit.Eventually(t, wait, func() bool { return available(r, "mcp_more_echo") && !available(r, "mcp_files_echo") }, "reloaded")
	testkit.Eventually(t, wait, func() bool {
		for _, c := range system[*protocol.MCPServerConfig](h) {
			if c.Name == "files" && c.Action == protocol.MCPServerConfigActionDelete {
				return true
			}
		}
		return false
	}, "removal announced")
}

func TestOperatorFileInvalid(t *testing.T) {
	h := newHarness(t)
	for name, body := range map[string]string{
		"unknown field": `{"servers": [{"name": "a", "command": "x", "url": "http://h"}]}`,
		"no command":    `{"servers": [{"name": "a"}]}`,
		"bad name":      `{"servers": [{"name": "a.b", "command": "x"}]}`,
		"twice":         `{"servers": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]}`,
		"not json":      `servers`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MCPServersFile = t.TempDir() + "/f.json"
			if err := os.WriteFile(cfg.MCPServersFile, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if r, err := tools.New(testContext(t), cfg, h.nc, h.js, h.ro, testkit.Log()); !errors.Is(err, tools.ErrInvalidConfig) {
				if r != nil {
					r.Close()
				}
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// fakeResolver answers from a table: nothing reaches DNS.
type fakeResolver map[string]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ip, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(ip)}, nil
}

// dialRecorder records what the registry asks to dial and connects
// nowhere.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) dial(_ context.Context, _, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, addr)
	return nil, errors.New("test dialer: not connecting")
}

func (d *dialRecorder) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// TestMCPHTTPDestinations: an HTTP MCP server from the bus never reaches
// an internal address — refused at once when the URL names one, and at
// connect time when its name resolves to one then (DNS rebinding).
func TestMCPHTTPDestinations(t *testing.T) {
	h := newHarness(t)
	rec := &dialRecorder{}
	cfg := testConfig()
	cfg.MCPAllowedHosts = nil
	cfg.MCPResolver = fakeResolver{"rebind.example": "127.0.0.1", "meta.example": "169.254.169.254",
		"private.example": "10.1.2.3", "public.example": "93.184.215.14"}
	cfg.MCPDial = rec.dial
	h.registry(cfg)
	upsert := func(name, url string) {
		h.publish(&protocol.MCPServerConfig{Name: name, Action: protocol.MCPServerConfigActionUpsert,
			Transport: protocol.Ptr(protocol.MCPServerConfigTransportHttp), Url: protocol.Ptr(url)})
	}
	for name, url := range map[string]string{
		"loopback": "http://127.0.0.1:8222/mcp", "loopback6": "http://[::1]/mcp", "ten": "http://10.0.0.1/mcp",
		"one72": "http://172.16.0.1/mcp", "one92": "http://192.168.0.1/mcp", "linklocal": "http://169.254.1.1/mcp",
		"metadata": "http://169.254.169.254/latest/meta-data/", "ula": "http://[fc00::1]/mcp", "localhost": "http://localhost:4222/mcp",
		"rebind": "http://rebind.example/mcp", "meta-name": "http://meta.example/mcp", "private-name": "http://private.example:8080/mcp",
	} {
		upsert(name, url)
		testkit.Eventually(t, wait, func() bool {
			st, ok := lastStatus(h, name)
			return ok && st.Status == protocol.MCPServerStatusStatusError && st.LastError != nil && strings.Contains(*st.LastError, "not a public address")
		}, "%s (%s) not refused", name, url)
	}
	if got := rec.dialled(); len(got) != 0 {
		t.Fatalf("dialled %v", got)
	}
	// A public name is dialled at the address it resolved to, nothing else.
	upsert("public", "http://public.example:8443/mcp")
	testkit.Eventually(t, wait, func() bool { return len(rec.dialled()) > 0 }, "public server dialled")
	for _, a := range rec.dialled() {
		if a != "93.184.215.14:8443" {
			t.Fatalf("dialled %s", a)
		}
	}
}

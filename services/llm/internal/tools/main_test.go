package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// stdioServerEnv makes the test binary run as an MCP server over stdio
// (the tests start it as a stdio server's command).
const stdioServerEnv = "ALICIA_TOOLS_TEST_MCP_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		err := testMCPServer(true, nil).Run(context.Background(), &mcp.StdioTransport{})
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "test MCP server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// pidDirEnv names a directory where a stdio test server leaves a file named
// after its process id.
const pidDirEnv = "ALICIA_TOOLS_TEST_PID_DIR"

type getenvIn struct {
	Name string `json:"name"`
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

// testMCPServer is an MCP server with the tools the tests call. exit adds
// tools for a stdio server (one makes its process exit). Closing stop ends
// calls of the slow tool.
func testMCPServer(exit bool, stop <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the disk is full")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Waits until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			// Over HTTP a cancellation can overtake the call it cancels and
			// be lost; stop ends the call when the test server closes.
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-stop:
				return nil, nil, errors.New("server stopped")
			}
		})
	if exit {
		if dir := os.Getenv(pidDirEnv); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o600)
		}
		mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Returns an environment variable."},
			func(_ context.Context, _ *mcp.CallToolRequest, in getenvIn) (*mcp.CallToolResult, any, error) {
				v, ok := os.LookupEnv(in.Name)
				if !ok {
					v = "<unset>"
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Ends the server process."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				fmt.Fprintln(os.Stderr, "fatal: asked to exit")
				os.Exit(3)
				return nil, nil, nil
			})
	}
	return s
}

// httpMCPServer serves testMCPServer over streamable HTTP on 127.0.0.1.
// addr, when not empty, is the address to listen on (to bring a server back
// where it was).
func httpMCPServer(t *testing.T, addr string) (*httptest.Server, *mcp.Server) {
	t.Helper()
	stop := make(chan struct{})
	srv := testMCPServer(false, stop)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{PropagateRequestCancellation: true})
	ts := httptest.NewUnstartedServer(h)
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		ts.Listener.Close()
		ts.Listener = ln
	}
	ts.Start()
	t.Cleanup(func() {
		close(stop)
		ts.CloseClientConnections()
		ts.Close()
		// Sessions whose client vanished without ending them (the server
		// "went away" under them) would otherwise linger.
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	return ts, srv
}

// harness is a registry's world: NATS with the streams, a fresh database
// (written directly, as persistence would) and a read-only pool on it.
type harness struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
	db *pgxpool.Pool // writer, plays persistence
	ro *pgxpool.Pool // what the registry reads through
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	url := pgtest.NewURL(t)
	ctx := testContext(t)
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	roCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	roCfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	ro, err := pgxpool.NewWithConfig(ctx, roCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ro.Close)
	nc := natstest.Connect(t, natstest.Run(t))
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, nc: nc, js: js, db: db, ro: ro}
}

// testConfig keeps every wait short.
func testConfig() tools.Config {
	c := tools.DefaultConfig()
	c.Timeout = 5 * time.Second
	c.WebSearchURL = "http://127.0.0.1:1"
	c.MCPConnectTimeout = 5 * time.Second
	c.MCPPingInterval = 100 * time.Millisecond
	c.MCPBackoffMin = 20 * time.Millisecond
	c.MCPBackoffMax = 200 * time.Millisecond
	c.MCPServersPoll = 20 * time.Millisecond
	// The tests' HTTP MCP servers listen on 127.0.0.1, which is not public.
	c.MCPAllowedHosts = []string{"127.0.0.1"}
	return c
}

// operatorFile writes an ALICIA_MCP_SERVERS_FILE listing the test binary as
// a stdio server under each name (env added to each) and returns its path.
func operatorFile(t *testing.T, path string, env map[string]string, names ...string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "mcp-servers.json")
	}
	type entry struct {
		Name    string            `json:"name"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	var f struct {
		Servers []entry `json:"servers"`
	}
	f.Servers = []entry{}
	for _, n := range names {
		e := map[string]string{stdioServerEnv: "1"}
		maps.Copy(e, env)
		f.Servers = append(f.Servers, entry{Name: n, Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: e})
	}
	b, _ := json.Marshal(f)
	old, _ := os.Stat(path)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if old != nil {
		// A change within the file system's time resolution still shows.
		_ = os.Chtimes(path, time.Time{}, old.ModTime().Add(time.Second))
	}
	return path
}

func (h *harness) registry(cfg tools.Config) *tools.Registry {
	h.t.Helper()
	r, err := tools.New(testContext(h.t), cfg, h.nc, h.js, h.ro, zerolog.Nop())
	if err != nil {
		h.t.Fatalf("tools.New: %v", err)
	}
	h.t.Cleanup(r.Close)
	return r
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	if _, err := h.db.Exec(testContext(h.t), sql, args...); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
}

// publish puts a system envelope on the SYSTEM stream, as the gateway does.
func (h *harness) publish(body protocol.Body) {
	h.t.Helper()
	if _, err := bus.NewPublisher(h.js).PublishSystem(testContext(h.t), protocol.New("", body), ""); err != nil {
		h.t.Fatalf("publish %T: %v", body, err)
	}
}

// system returns the bodies of type T stored on the SYSTEM stream, in order.
func system[T protocol.Body](h *harness) []T {
	h.t.Helper()
	var zero T
	var out []T
	err := bus.Replay(testContext(h.t), h.nc, bus.StreamSystem, subjects.System(zero.MessageType()), 0, func(m bus.Stored) error {
		env, err := protocol.Decode(m.Data)
		if err != nil {
			return err
		}
		out = append(out, env.Body.(T))
		return nil
	})
	if err != nil {
		h.t.Fatalf("replay SYSTEM: %v", err)
	}
	return out
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func names(specs []tools.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

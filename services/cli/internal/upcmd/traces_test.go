package upcmd_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/jaegertest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/pkg/testkit/uptest"
	"github.com/alicia-voice/alicia/services/cli/internal/upcmd"
)

// TestUpTracesToJaeger runs the real `alicia up --traces` binary: it starts
// Jaeger on 127.0.0.1 and prints its URL; one text turn through the gateway
// (`alicia chat`) is then one trace in Jaeger's query API, with the spans of
// the gateway's edge, the llm's turn and model request, the memory search
// (through the NATS request's header) and persistence's stores, parented as
// the turn went. Ctrl-C stops Jaeger with the stack.
//
// The Jaeger binary is the cached one (the test task's tools step builds
// it first); under CI=true a missing one fails the test.
func TestUpTracesToJaeger(t *testing.T) {
	devtools.Need(t, devtools.LiveKit)
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		testkit.Missing(t, "%v", err)
	}
	jaegerBin := jaegertest.Binary(t)
	pgURL := pgtest.NewURL(t)
	t.Cleanup(func() { // up made the database's roles
		if err := localpg.DropRoles(context.Background(), pgURL); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	bin := uptest.Build(t)
	model := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("Traced answer.")))
	embeddings := fakeopenai.New(t) // memory search on: the turn asks memory.search
	dataDir := filepath.Join(t.TempDir(), "data")
	up := uptest.Start(t, bin, uptest.UserEnv(map[string]string{
		"ALICIA_JAEGER_BIN":            jaegerBin,
		"ALICIA_JAEGER_UI_PORT":        "0",
		"ALICIA_JAEGER_OTLP_GRPC_PORT": "0",
		"ALICIA_JAEGER_OTLP_HTTP_PORT": "0",
		"OTEL_EXPORTER_OTLP_ENDPOINT":  "http://" + testkit.FreeAddr(t), // replaced by Jaeger's
		"OTEL_BSP_SCHEDULE_DELAY":      "100",                           // ms: spans reach Jaeger soon after they end
		"ALICIA_POSTGRES_URL":          pgURL,
		"ALICIA_DATA_DIR":              dataDir,
		"ALICIA_NATS_URL":              "nats://" + testkit.FreeAddr(t),
		"ALICIA_HTTP_ADDR":             "127.0.0.1:0",
		"ALICIA_LLM_URL":               model.URL(),
		"ALICIA_LLM_MODEL":             "fake-chat",
		"ALICIA_EMBEDDING_URL":         embeddings.URL(),
		"ALICIA_ASR_URL":               "http://" + testkit.FreeAddr(t) + "/v1",
		"ALICIA_LIVEKIT_PORT":          "0", "ALICIA_LIVEKIT_RTC_TCP_PORT": "0", "ALICIA_LIVEKIT_RTC_UDP_PORT": "0",
		// Loopback only: no LAN address of the machine in a test.
		"ALICIA_LIVEKIT_NODE_IP": "127.0.0.1", "ALICIA_HTTPS_ADDR": "127.0.0.1:0",
	}), "up", "--traces")
	out := up.Out
	ui := up.Field("Traces:")
	if !strings.HasPrefix(ui, "http://127.0.0.1:") || !strings.Contains(out.String(), "services alicia-<service>: ") {
		t.Fatalf("no Jaeger URL on 127.0.0.1 in the banner:\n%s", out.String())
	}
	if _, err := http.Get(ui + "/api/services"); err != nil {
		t.Fatalf("Jaeger's query API: %v", err)
	}
	// Its page is pkg/jaeger's trace viewer (pkg/jaeger TestUIInBrowser drives it).
	if resp, err := http.Get(ui + "/"); err != nil {
		t.Fatalf("Jaeger's page: %v", err)
	} else {
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(page, []byte("<title>Traces · Alicia</title>")) || !strings.Contains(out.String(), "lists the recent traces") {
			t.Fatalf("Jaeger's page is not the trace viewer:\n%s\nbanner:\n%s", page, out.String())
		}
	}
	base, key := up.Field("HTTP:"), up.Field("API key:")

	chat := exec.Command(bin, "chat", "--url", base)
	chat.Env = uptest.UserEnv(map[string]string{"ALICIA_API_KEY": key})
	chat.Stdin = strings.NewReader("Is this traced?\n")
	var chatOut, chatErr bytes.Buffer
	chat.Stdout, chat.Stderr = &chatOut, &chatErr
	if err := chat.Run(); err != nil || !strings.Contains(chatOut.String(), "Traced answer.") {
		t.Fatalf("alicia chat: %v\n%s\n%s", err, chatOut.String(), chatErr.String())
	}

	// The turn's trace id, as persistence stored it with the user message.
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var traceID string
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		return pool.QueryRow(context.Background(), `SELECT coalesce(trace_id, '') FROM alicia_messages
			WHERE message_role = 'user' AND contents = 'Is this traced?'`).Scan(&traceID)
	}, "the user message stored")
	if len(traceID) != 32 {
		t.Fatalf("user message trace_id %q", traceID)
	}

	want := []string{"edge.receive UserMessage", "llm.turn", "llm.model_request", "rpc " + rpc.MemorySearchSubject, "memory.search",
		"persistence.store UserMessage", "persistence.store StartAnswer", "persistence.store AssistantSentence"}
	var tr jaegertest.Trace
	byName := map[string]jaegertest.Span{}
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		tr, err = jaegertest.GetTrace(context.Background(), ui, traceID)
		if err != nil {
			return err
		}
		clear(byName)
		for _, s := range tr.Spans {
			if _, dup := byName[s.OperationName]; !dup {
				byName[s.OperationName] = s
			}
		}
		var missing []string
		for _, n := range want {
			if _, ok := byName[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("trace %s lacks %v (has %d spans)", traceID, missing, len(tr.Spans))
		}
		return nil
	}, "the turn's trace in Jaeger")

	// Parented as the turn went.
	for child, parent := range map[string]string{"llm.turn": "edge.receive UserMessage", "llm.model_request": "llm.turn",
		"rpc " + rpc.MemorySearchSubject: "llm.turn", "memory.search": "rpc " + rpc.MemorySearchSubject,
		"persistence.store UserMessage": "edge.receive UserMessage"} {
		if got := byName[child].Parent(); got != byName[parent].SpanID {
			t.Errorf("%s's parent is %q, want %s (%s)", child, got, parent, byName[parent].SpanID)
		}
	}
	if p := byName["edge.receive UserMessage"].Parent(); p != "" {
		t.Errorf("the edge span has a parent %s: a turn's trace starts where its message enters", p)
	}
	if m := byName["llm.model_request"].Tag("gen_ai.request.model"); m != "fake-chat" {
		t.Errorf("model request model %v, want fake-chat", m)
	}
	// Spans of several services, each under its own service.name though
	// they run in up's one process (as when each runs alone), and
	// instrumented in its own scope; the shared packages' spans (pkg/edge,
	// pkg/rpc) under the service they ran for.
	scopes := map[string]bool{}
	services := map[string]bool{}
	for _, s := range tr.Spans {
		services[tr.Processes[s.ProcessID].ServiceName] = true
		if sc, ok := s.Tag("otel.scope.name").(string); ok {
			scopes[sc] = true
		}
	}
	for _, sc := range []string{"pkg/edge", "services/llm", "pkg/rpc", "services/persistence"} {
		if !scopes["github.com/alicia-voice/alicia/"+sc] {
			t.Errorf("no span of scope %s in the trace (scopes %v)", sc, scopes)
		}
	}
	for span, service := range map[string]string{
		"edge.receive UserMessage":       "alicia-gateway",
		"llm.turn":                       "alicia-llm",
		"llm.model_request":              "alicia-llm",
		"rpc " + rpc.MemorySearchSubject: "alicia-llm",
		"memory.search":                  "alicia-memory",
		"persistence.store UserMessage":  "alicia-persistence",
		"persistence.store StartAnswer":  "alicia-persistence",
	} {
		if got := tr.Processes[byName[span].ProcessID].ServiceName; got != service {
			t.Errorf("span %s of service %q, want %s", span, got, service)
		}
	}
	if services["alicia-up"] || services[""] {
		t.Errorf("spans of no service of up's in the trace (services %v)", services)
	}
	// The query by service (the UI's search) finds it under each of them.
	for _, service := range []string{"alicia-gateway", "alicia-llm", "alicia-memory", "alicia-persistence"} {
		found, err := jaegertest.FindTraces(context.Background(), ui, service, 100)
		if err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, f := range found {
			listed = listed || f.TraceID == traceID
		}
		if !listed {
			t.Errorf("GET /api/traces?service=%s does not list the turn's trace %s (%d traces)", service, traceID, len(found))
		}
	}

	up.Stop(t)
	if _, err := http.Get(ui + "/api/services"); err == nil {
		t.Fatal("Jaeger still answers after up stopped")
	}
	if strings.Contains(up.Log.String(), "stop jaeger") {
		t.Errorf("stopping Jaeger failed:\n%s", up.Log.String())
	}
}

func TestTracesFromEnv(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    upcmd.Traces
		wantErr string
	}{
		{name: "defaults: off, Jaeger's ports", want: upcmd.Traces{UIPort: 16686, OTLPGRPCPort: 4317, OTLPHTTPPort: 4318}},
		{name: "on, free ports, UI assets",
			env: map[string]string{"ALICIA_TRACES": "true", "ALICIA_JAEGER_UI_PORT": "0", "ALICIA_JAEGER_OTLP_GRPC_PORT": "0",
				"ALICIA_JAEGER_OTLP_HTTP_PORT": "14318", "ALICIA_JAEGER_UI_ASSETS": "/srv/jaeger-ui"},
			want: upcmd.Traces{Jaeger: true, UIPort: 0, OTLPGRPCPort: 0, OTLPHTTPPort: 14318, UIAssets: "/srv/jaeger-ui"}},
		{name: "not a boolean", env: map[string]string{"ALICIA_TRACES": "jaeger"}, wantErr: "ALICIA_TRACES"},
		{name: "port out of range", env: map[string]string{"ALICIA_JAEGER_UI_PORT": "70000"}, wantErr: "ALICIA_JAEGER_UI_PORT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"ALICIA_TRACES", "ALICIA_JAEGER_UI_PORT", "ALICIA_JAEGER_OTLP_GRPC_PORT", "ALICIA_JAEGER_OTLP_HTTP_PORT", "ALICIA_JAEGER_UI_ASSETS"} {
				t.Setenv(k, tt.env[k])
			}
			t.Setenv("ALICIA_DATA_DIR", t.TempDir())
			c, err := upcmd.ConfigFromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ConfigFromEnv = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || c.Traces != tt.want {
				t.Fatalf("Traces = %+v, %v; want %+v", c.Traces, err, tt.want)
			}
		})
	}
}

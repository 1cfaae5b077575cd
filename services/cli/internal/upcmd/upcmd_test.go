package upcmd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/cli/internal/upcmd"
)

// field returns the first word after label in the output.
func field(out, label string) string {
	_, rest, ok := strings.Cut(out, label)
	if !ok {
		return ""
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUpRunsTheStack starts `alicia up`, sends an envelope through its NATS
// and finds the row persistence wrote, then stops it as Ctrl-C would.
func TestUpRunsTheStack(t *testing.T) {
	pgURL := pgtest.NewURL(t)
	t.Setenv("ALICIA_POSTGRES_URL", pgURL)
	model := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("Hello from the stack.")))
	t.Setenv("ALICIA_LLM_URL", model.URL())
	t.Setenv("ALICIA_LLM_MODEL", "fake-chat")
	t.Setenv("ALICIA_EMBEDDING_URL", "")
	for _, k := range []string{"ALICIA_NATS_URL", "ALICIA_HTTP_ADDR", "ALICIA_API_KEYS"} {
		t.Setenv(k, "") // Run sets them for its services; restore them afterwards
	}
	cfg := upcmd.Config{NATSURL: "nats://" + freePort(t), DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- upcmd.Run(ctx, cfg, out, &testkit.SyncBuffer{}) }()
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "Alicia is up") }, "stack did not come up")
	if strings.Contains(out.String(), pgURL) {
		t.Fatal("the Postgres password was printed")
	}
	httpBase, key := field(out.String(), "HTTP:"), field(out.String(), "API key:")
	if !strings.HasPrefix(httpBase, "http://127.0.0.1:") || !strings.HasPrefix(key, "dev-") {
		t.Fatalf("output = %q", out.String())
	}
	req, _ := http.NewRequest(http.MethodGet, httpBase+"/readyz", nil)
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	}, "gateway not ready")
	req, _ = http.NewRequest(http.MethodGet, httpBase+"/v1/ws", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("the printed key was not accepted: %v %v", resp, err)
	}

	nc, err := nats.Connect(cfg.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		_, err := bus.NewPublisher(js).PublishClient(context.Background(), protocol.Envelope{StanzaID: 1, ConversationID: "ac_up", Type: protocol.TypeUserMessage,
			Body: &protocol.UserMessage{ID: "am_up", ConversationID: "ac_up", Content: "hello"}})
		return err
	}, "publish")
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_messages WHERE id = 'am_up' AND contents = 'hello'`).Scan(&n)
		return n == 1
	}, "persistence did not write the message")
	// The llm answered it through the model configured in the environment.
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_messages WHERE previous_id = 'am_up'
			AND message_role = 'assistant' AND completion_status = 'completed' AND contents = 'Hello from the stack.'`).Scan(&n)
		return n == 1
	}, "the llm did not answer")
	for _, want := range []string{"LLM:", model.URL(), "(fake-chat) reachable", "Embeddings: not configured"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q: %s", want, out.String())
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("alicia up did not stop")
	}
	if !strings.Contains(out.String(), "Alicia stopped") {
		t.Fatalf("output = %q", out.String())
	}
}

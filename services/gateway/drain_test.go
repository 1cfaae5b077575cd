package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/svcmain/svcmaintest"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

// TestDrainFinishesRequestsAndSendsWebSocketsElsewhere sends SIGTERM to the
// gateway binary while a REST request is in flight (its body still
// arriving) and a WebSocket is open: the WebSocket is closed with 1012
// (service restart), the listener closes (no new connection: readiness
// probes fail), the request in flight completes, and the process exits 0. Another gateway then lists
// the conversation that request created, once, and takes the client back.
func TestDrainFinishesRequestsAndSendsWebSocketsElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	ns := natstest.Run(t)
	pgURL := pgtest.NewURL(t)
	persistencetest.Start(t, ns.ClientURL(), pgURL)
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	bin := svcmaintest.Build(t, "./cmd/gateway")
	p := svcmaintest.Start(t, bin, "ALICIA_HTTP_ADDR="+addr, "ALICIA_NATS_URL="+ns.ClientURL(), "ALICIA_POSTGRES_URL="+pgURL,
		"ALICIA_API_KEYS=alice:"+aliceKey, "ALICIA_SHUTDOWN_TIMEOUT=40s", "ALICIA_LOG_LEVEL=warn")
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers(base+"/readyz", http.StatusOK, "ready"), "gateway ready")

	// A WebSocket client in a conversation.
	ws, _, err := websocket.Dial(context.Background(), "ws://"+addr+"/v1/ws?token="+aliceKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	alice := &wsClient{t: t, c: ws, next: 1}
	if env := alice.recv(); env.Type != protocol.TypeServerInfo {
		t.Fatalf("first frame %+v, want ServerInfo", env)
	}
	alice.send("", &protocol.Configuration{ClientVersion: protocol.Ptr("test/1")})
	cfg, ok := alice.recv().Body.(*protocol.Configuration)
	if !ok || cfg.ConversationID == nil {
		t.Fatal("no Configuration reply")
	}

	// A request in flight: its handler reads the body (the server's 100
	// Continue says so), half of which is in.
	body := `{"title":"created while draining"}`
	busy := dialRaw(t, addr)
	fmt.Fprintf(busy, "POST /v1/conversations HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		addr, aliceKey, len(body))
	replies := bufio.NewReader(busy)
	if code, text := readResponse(t, busy, replies); code != http.StatusContinue {
		t.Fatalf("POST /v1/conversations: %d %s before its body, want 100 Continue", code, text)
	}
	fmt.Fprint(busy, body[:10])

	p.Signal(syscall.SIGTERM)
	// The WebSocket hears 1012 and reconnects elsewhere.
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, _, err := ws.Read(rctx)
		if err == nil {
			continue // a frame sent before the close
		}
		if code := websocket.CloseStatus(err); code != websocket.StatusServiceRestart {
			t.Fatalf("WebSocket ended with %v (close code %d), want 1012 service restart", err, code)
		}
		break
	}
	// No new connection is accepted.
	testkit.Eventually(t, 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	}, "the listener still accepts connections after the signal")

	// The request in flight completes.
	fmt.Fprint(busy, body[10:])
	code, text := readResponse(t, busy, replies)
	if code != http.StatusCreated {
		t.Fatalf("request in flight at the signal: %d %s, want 201", code, text)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(text), &created); err != nil || created.ID == "" {
		t.Fatalf("created conversation %q: %v", text, err)
	}
	if code := p.Wait(60 * time.Second); code != 0 {
		t.Fatalf("gateway exited %d after SIGTERM, want 0", code)
	}

	// Another gateway: the conversation is there once, and the client is
	// back in its conversation.
	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL, gcfg.APIKeys = "127.0.0.1:0", ns.ClientURL(), pgURL, "alice:"+aliceKey
	ready := make(chan string, 1)
	testkit.Go(t, "gateway", func(ctx context.Context) error {
		return gateway.Run(ctx, gcfg, zerolog.Nop(), func(a string) { ready <- a })
	})
	other := "http://" + <-ready
	req, _ := http.NewRequest(http.MethodGet, other+"/v1/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if n := strings.Count(string(listed), created.ID); resp.StatusCode != http.StatusOK || n != 1 {
		t.Fatalf("other gateway lists %q (status %d): the conversation %s %d times, want once", listed, resp.StatusCode, created.ID, n)
	}
	again := (&stack{base: other}).dial(t, aliceKey)
	again.send(*cfg.ConversationID, &protocol.Configuration{ConversationID: cfg.ConversationID, ClientVersion: protocol.Ptr("test/1")})
	if back, ok := again.recv().Body.(*protocol.Configuration); !ok || back.ConversationID == nil || *back.ConversationID != *cfg.ConversationID {
		t.Fatalf("reconnected client: got %+v, want its conversation %s", back, *cfg.ConversationID)
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readResponse reads one HTTP response from c through r: its status and
// body.
func readResponse(t *testing.T, c net.Conn, r *bufio.Reader) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(errors.Join(errors.New("reading the response"), err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

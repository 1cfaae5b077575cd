package ws_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway/internal/ws"
)

// blockingAuth holds Authorize until release is closed.
type blockingAuth struct {
	entered  chan struct{}
	release  chan struct{}
	returned atomic.Bool
}

func (a *blockingAuth) Authorize(ctx context.Context, user, cid string) error {
	close(a.entered)
	<-a.release
	a.returned.Store(true)
	return nil
}

// serve runs h behind a test server; served is closed when Serve returns.
func serve(t *testing.T, h *ws.Handler) (url string, served chan struct{}) {
	t.Helper()
	served = make(chan struct{})
	e := echo.New()
	e.GET("/v1/ws", func(c echo.Context) error {
		defer close(served)
		return h.Serve(c)
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws", served
}

func handler(t *testing.T, auth *blockingAuth) *ws.Handler {
	t.Helper()
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return &ws.Handler{JS: js, Auth: auth, Log: zerolog.Nop(), PingInterval: 50 * time.Millisecond}
}

// TestUnansweredPingsEndTheConnection: a client that stops answering (it
// never reads, so never answers a ping) is disconnected; one that reads
// stays connected.
func TestUnansweredPingsEndTheConnection(t *testing.T) {
	h := handler(t, nil)
	url, served := serve(t, h)
	live, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.CloseNow()
	go func() {
		for {
			if _, _, err := live.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	select {
	case <-served:
		t.Fatal("a client that answers pings was disconnected")
	case <-time.After(20 * h.PingInterval):
	}

	url, served = serve(t, h)
	dead, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.CloseNow()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("a client that never answers pings is still connected")
	}
}

// TestServeWaitsForItsReader: the connection ends (its client vanished)
// while the reader is still handling a Configuration; Serve returns only
// after the reader has.
func TestServeWaitsForItsReader(t *testing.T) {
	auth := &blockingAuth{entered: make(chan struct{}), release: make(chan struct{})}
	h := handler(t, auth)
	url, served := serve(t, h)
	c, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	cid := "ac_reader"
	frame, err := protocol.Encode(protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration,
		Body: &protocol.Configuration{ConversationID: &cid}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(context.Background(), websocket.MessageBinary, frame); err != nil {
		t.Fatal(err)
	}
	<-auth.entered
	c.CloseNow() // the client vanishes; unanswered pings end the session
	select {
	case <-served:
		t.Fatal("Serve returned while its reader was still handling a frame")
	case <-time.After(20 * h.PingInterval):
	}
	close(auth.release)
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its reader did")
	}
	if !auth.returned.Load() {
		t.Fatal("Serve returned before the reader")
	}
}

// TestShutdownTellsClientsToReconnect: Shutdown closes open connections with
// 1012 (service restart), waits for their sessions (one whose reader is
// still handling a frame holds it), and refuses new ones.
func TestShutdownTellsClientsToReconnect(t *testing.T) {
	auth := &blockingAuth{entered: make(chan struct{}), release: make(chan struct{})}
	h := handler(t, auth)
	h.PingInterval = time.Minute
	url, served := serve(t, h)
	c, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	closed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				closed <- err
				return
			}
		}
	}()
	cid := "ac_reader"
	frame, err := protocol.Encode(protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration,
		Body: &protocol.Configuration{ConversationID: &cid}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(context.Background(), websocket.MessageBinary, frame); err != nil {
		t.Fatal(err)
	}
	<-auth.entered // the session's reader is busy with the Configuration
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if err := h.Shutdown(short); err == nil {
		t.Fatal("Shutdown returned while a session's reader was still handling a frame")
	}
	select {
	case err := <-closed:
		if code := websocket.CloseStatus(err); code != websocket.StatusServiceRestart {
			t.Fatalf("closed with %v (%v), want 1012 service restart", code, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client was not disconnected")
	}
	close(auth.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after the reader returned: %v", err)
	}
	if !auth.returned.Load() {
		t.Fatal("Shutdown returned before the session's reader")
	}
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	url2, _ := serve(t, h)
	if _, resp, err := websocket.Dial(context.Background(), url2, nil); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("an upgrade after Shutdown: err %v, response %v; want 503", err, resp)
	}
}

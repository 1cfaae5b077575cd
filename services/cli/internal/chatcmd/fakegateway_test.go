package chatcmd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/apitest"
)

// key has characters a URL encodes, so a test can look for it in every form.
const key = "chat-key+/=0123456789"

// fakeGateway plays the gateway's side of /v1/ws as pkg/edge does: the first
// envelope is a Configuration (a new conversation, or a known one resumed
// after lastSequenceSeen), the conversation's server envelopes are kept as a
// stream with stanza ids -(sequence) and delivered live, and a reconnecting
// client gets exactly those after its lastSequenceSeen. Other paths are the
// REST API of apitest.
type fakeGateway struct {
	t    *testing.T
	srv  *httptest.Server
	rest *apitest.Server

	received chan protocol.Envelope // every client envelope, in order

	mu     sync.Mutex
	cid    string
	seq    int32
	stream []protocol.Envelope
	live   *websocket.Conn
	// overlap replays that many envelopes the client had already seen on
	// the next resume (an at-least-once delivery the client must absorb).
	overlap int
	// dropOn closes the connection as soon as an envelope of this type
	// arrives, as if it was lost on the way.
	dropOn protocol.MessageType
	dials  int
	// requests is every HTTP request received (REST and WebSocket upgrades).
	requests []seenRequest
}

// seenRequest is what a proxy in front of the gateway would log of a
// request (its URL), and the credential it carried.
type seenRequest struct {
	uri, auth string
}

func newFakeGateway(t *testing.T) *fakeGateway {
	g := &fakeGateway{t: t, rest: apitest.New(t, key), received: make(chan protocol.Envelope, 256), seq: 40}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/ws", g.serveWS)
	mux.Handle("/", g.rest)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.requests = append(g.requests, seenRequest{uri: r.RequestURI, auth: r.Header.Get("Authorization")})
		g.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) serveWS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("token") {
		g.t.Errorf("the client put a key in the WebSocket URL: %s", r.URL)
	}
	if r.Header.Get("Authorization") != "Bearer "+key {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 401, "message": "missing or invalid API key"}})
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	g.mu.Lock()
	g.dials++
	g.mu.Unlock()
	for {
		_, frame, err := c.Read(ctx)
		if err != nil {
			return
		}
		env, err := protocol.Decode(frame)
		if err != nil {
			g.t.Errorf("client sent an invalid envelope: %v", err)
			return
		}
		if cfg, ok := env.Body.(*protocol.Configuration); ok {
			g.configure(ctx, c, cfg)
			g.received <- env // after configure: a test that saw it may publish to the new connection
			continue
		}
		g.received <- env
		g.mu.Lock()
		drop := g.dropOn != 0 && env.Type == g.dropOn
		if drop {
			g.dropOn = 0
			g.live = nil
		}
		g.mu.Unlock()
		if drop {
			return
		}
	}
}

func (g *fakeGateway) configure(ctx context.Context, c *websocket.Conn, cfg *protocol.Configuration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var replay []protocol.Envelope
	switch {
	case cfg.ConversationID == nil:
		g.cid = "ac_chat"
		replay = g.stream
	case *cfg.ConversationID == "ac_refused":
		g.write(ctx, c, protocol.New(*cfg.ConversationID, &protocol.ErrorMessage{ID: "aerr_1", ConversationID: *cfg.ConversationID,
			Code: protocol.CodeForbidden, Message: "conversation belongs to another user", Severity: 2, Recoverable: true}))
		return
	case *cfg.ConversationID == "ac_hostile":
		g.write(ctx, c, protocol.New(*cfg.ConversationID, &protocol.ErrorMessage{ID: "aerr_1", ConversationID: *cfg.ConversationID,
			Code: protocol.CodeForbidden, Message: hostileRefusal, Severity: 2, Recoverable: true}))
		return
	default:
		g.cid = *cfg.ConversationID
		if cfg.LastSequenceSeen != nil {
			from := slices.IndexFunc(g.stream, func(e protocol.Envelope) bool { return e.StanzaID < *cfg.LastSequenceSeen })
			if from >= 0 {
				replay = g.stream[max(0, from-g.overlap):]
			}
			g.overlap = 0
		}
	}
	for _, env := range replay {
		g.write(ctx, c, env)
	}
	g.live = c
	g.publishLocked(&protocol.Configuration{ConversationID: protocol.Ptr(g.cid), Features: cfg.Features})
}

func (g *fakeGateway) write(ctx context.Context, c *websocket.Conn, env protocol.Envelope) {
	b, err := protocol.Encode(env)
	if err != nil {
		g.t.Errorf("encode %s: %v", env.Type, err)
		return
	}
	_ = c.Write(ctx, websocket.MessageBinary, b)
}

// publish appends a server envelope to the conversation's stream and sends
// it to the connected client, if any; it returns its stanza id.
func (g *fakeGateway) publish(body protocol.Body) int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.publishLocked(body)
}

func (g *fakeGateway) publishLocked(body protocol.Body) int32 {
	g.seq++
	env := protocol.New(g.cid, body)
	env.StanzaID = -g.seq
	g.stream = append(g.stream, env)
	if g.live != nil {
		g.write(context.Background(), g.live, env)
	}
	return env.StanzaID
}

// send delivers an envelope outside the stream (as the edge does with errors
// about the client's own input): no stanza id.
func (g *fakeGateway) send(body protocol.Body) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.live != nil {
		g.write(context.Background(), g.live, protocol.New(g.cid, body))
	}
}

// closeWith closes the connection with code and reason, as the gateway
// does when it revokes one.
func (g *fakeGateway) closeWith(code websocket.StatusCode, reason string) {
	g.mu.Lock()
	c := g.live
	g.live = nil
	g.mu.Unlock()
	if c != nil {
		_ = c.Close(code, reason)
	}
}

// drop cuts the connection without a close handshake.
func (g *fakeGateway) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.live != nil {
		g.live.CloseNow()
		g.live = nil
	}
}

// expect returns the next client envelope, which must be of type want.
func (g *fakeGateway) expect(want protocol.MessageType) protocol.Envelope {
	g.t.Helper()
	select {
	case env := <-g.received:
		if env.Type != want {
			g.t.Fatalf("client sent %s %+v, want %s", env.Type, env.Body, want)
		}
		return env
	case <-time.After(10 * time.Second):
		g.t.Fatalf("client sent no %s", want)
	}
	return protocol.Envelope{}
}

// nothingMore asserts the client sent nothing else so far.
func (g *fakeGateway) nothingMore() {
	g.t.Helper()
	select {
	case env := <-g.received:
		g.t.Fatalf("client also sent %s %+v", env.Type, env.Body)
	default:
	}
}

var interrupt os.Signal = os.Interrupt

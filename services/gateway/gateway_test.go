package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

const (
	aliceKey = "alice-key-0123456789"
	bobKey   = "bob-key-0123456789ab"
	// adminKey is the key of root, the stack's administrator (ALICIA_ADMIN_USERS).
	adminKey = "root-key-0123456789ab"
)

type stack struct {
	base  string
	pgURL string
	pool  *pgxpool.Pool
	pub   *bus.Publisher
	nc    *nats.Conn
}

// stackOptions choose what newStack runs besides NATS, Postgres and the gateway.
type stackOptions struct {
	noPersistence bool
	// memory runs the memory service; embeddings is its embeddings URL ("" = search off).
	memory     bool
	embeddings string
	gateway    func(*gateway.Config)
	// runContext, when set, wraps the context the gateway runs with.
	runContext func(context.Context) context.Context
}

// newStack runs NATS, Postgres, persistence and the gateway (and what opts add).
func newStack(t *testing.T, opts ...func(*stackOptions)) *stack {
	t.Helper()
	var o stackOptions
	for _, f := range opts {
		f(&o)
	}
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	pgURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if !o.noPersistence {
		persistencetest.Start(t, ns.ClientURL(), pgURL) // stopped after the services below
	}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	run := func(f func() error) {
		c := make(chan error, 1)
		done = append(done, c)
		go func() { c <- f() }()
	}
	if o.memory {
		mcfg := memory.DefaultConfig()
		mcfg.NATSURL, mcfg.PostgresURL, mcfg.EmbeddingURL, mcfg.EmbeddingModel = ns.ClientURL(), pgURL, o.embeddings, "fake-embedding"
		mcfg.Extraction = false
		run(func() error { return memory.Run(ctx, mcfg, zerolog.Nop()) })
	}

	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL = "127.0.0.1:0", ns.ClientURL(), pgURL
	gcfg.APIKeys = "alice:" + aliceKey + ",bob:" + bobKey + ",root:" + adminKey
	gcfg.AdminUsers = "root"
	gcfg.RateLimit = 1000
	if o.gateway != nil {
		o.gateway(&gcfg)
	}
	addr := make(chan string, 1)
	gdone := make(chan error, 1)
	done = append(done, gdone)
	gctx := ctx
	if o.runContext != nil {
		gctx = o.runContext(ctx)
	}
	go func() { gdone <- gateway.Run(gctx, gcfg, zerolog.Nop(), func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		for _, c := range done {
			if err := <-c; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service: %v", err)
			}
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-gdone:
		t.Fatalf("gateway: %v", err)
	}
	s := &stack{base: base, pgURL: pgURL, pool: pool, pub: bus.NewPublisher(js), nc: nc}
	if o.memory {
		s.waitService(t, rpc.MemorySearchSubject)
	}
	if !o.noPersistence {
		s.waitService(t, rpc.AppliedSubject)
	}
	return s
}

// waitService waits until a micro service answers. The probes are valid
// requests: an error reply of persistence's asynchronous handlers races with
// nats micro's stats bookkeeping (see the report on persistence).
func (s *stack) waitService(t *testing.T, subject string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var err error
		switch subject {
		case rpc.AppliedSubject:
			err = rpc.WaitApplied(ctx, s.nc, bus.StreamConversations, 0)
		default:
			_, err = rpc.MemorySearch(ctx, s.nc, rpc.MemorySearchRequest{UserID: "probe"})
		}
		return !errors.Is(err, rpc.ErrNoResponders)
	}, "no service on %s", subject)
}

type wsClient struct {
	t    *testing.T
	c    *websocket.Conn
	next int32
	info protocol.Envelope // the ServerInfo that opens every connection
}

func (s *stack) dial(t *testing.T, key string) *wsClient {
	t.Helper()
	return dialWS(t, strings.Replace(s.base, "http", "ws", 1)+"/v1/ws?token="+key, nil)
}

// dialWS opens a WebSocket at url and reads the ServerInfo that opens it.
func dialWS(t *testing.T, url string, opts *websocket.DialOptions) *wsClient {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(2 << 20)
	t.Cleanup(func() { c.CloseNow() })
	w := &wsClient{t: t, c: c, next: 1}
	if w.info = w.recv(); w.info.Type != protocol.TypeServerInfo {
		t.Fatalf("first frame %+v, want ServerInfo", w.info)
	}
	return w
}

func (w *wsClient) send(cid string, body protocol.Body) {
	w.t.Helper()
	b, err := protocol.Encode(protocol.Envelope{StanzaID: w.next, ConversationID: cid, Type: body.MessageType(), Body: body})
	if err != nil {
		w.t.Fatal(err)
	}
	w.next++
	if err := w.c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wsClient) recv() protocol.Envelope {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := w.c.Read(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	env, err := protocol.Decode(b)
	if err != nil {
		w.t.Fatal(err)
	}
	return env
}

func TestWebSocketConversation(t *testing.T) {
	s := newStack(t)
	alice := s.dial(t, aliceKey)
	alice.send("", &protocol.Configuration{ClientVersion: protocol.Ptr("test/1")})
	reply := alice.recv()
	cfg, ok := reply.Body.(*protocol.Configuration)
	if !ok || cfg.ConversationID == nil {
		t.Fatalf("reply = %+v", reply)
	}
	cid := *cfg.ConversationID

	// Malformed input: an ErrorMessage, and the connection stays usable.
	if err := alice.c.Write(context.Background(), websocket.MessageBinary, []byte{0xc1}); err != nil {
		t.Fatal(err)
	}
	if e, ok := alice.recv().Body.(*protocol.ErrorMessage); !ok || e.Code != protocol.CodeMalformed {
		t.Fatalf("want ErrorMessage 101, got %+v", e)
	}
	alice.send(cid, &protocol.UserMessage{ID: "am_hello", ConversationID: cid, Content: "hello"})
	testkit.Eventually(t, 10*time.Second, func() bool {
		var owner string
		_ = s.pool.QueryRow(context.Background(), `SELECT c.user_id FROM alicia_messages m JOIN alicia_conversations c ON c.id = m.conversation_id WHERE m.id = 'am_hello'`).Scan(&owner)
		return owner == "alice"
	}, "the message did not reach Postgres under alice")

	// A server envelope reaches the client stamped with its stream sequence.
	ack, err := s.pub.PublishServer(context.Background(), protocol.New(cid, &protocol.StartAnswer{ID: "am_ans", PreviousID: "am_hello", ConversationID: cid}), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := alice.recv(); got.Type != protocol.TypeStartAnswer || got.StanzaID != -int32(ack.Sequence) {
		t.Fatalf("got %+v, want StartAnswer stanza %d", got, -int32(ack.Sequence))
	}

	// Reconnect after the Configuration reply: exactly the StartAnswer again, then live.
	again := s.dial(t, aliceKey)
	again.send("", &protocol.Configuration{ConversationID: &cid, LastSequenceSeen: &reply.StanzaID})
	if got := again.recv(); got.Type != protocol.TypeStartAnswer || got.StanzaID != -int32(ack.Sequence) {
		t.Fatalf("resumed with %+v", got)
	}
	if got := again.recv(); got.Type != protocol.TypeConfiguration {
		t.Fatalf("then %+v, want the new Configuration reply", got)
	}

	// Bob may not touch alice's conversation.
	bob := s.dial(t, bobKey)
	bob.send("", &protocol.Configuration{ConversationID: &cid})
	if e, ok := bob.recv().Body.(*protocol.ErrorMessage); !ok || e.Code != protocol.CodeForbidden {
		t.Fatalf("want ErrorMessage 203, got %+v", e)
	}
}

func TestAuthAndHealth(t *testing.T) {
	s := newStack(t)
	for _, c := range []struct {
		path, key string
		status    int
	}{
		{"/healthz", "", 200},
		{"/livez", "", 200},
		{"/readyz", "", 200},
		{"/metrics", "", 200},
		{"/v1/ws", "", 401},
		{"/v1/ws?token=not-a-valid-key-at-all", "", 401},
		{"/v1/ws", aliceKey, 426}, // a valid key, but not a WebSocket upgrade
	} {
		req, _ := http.NewRequest(http.MethodGet, s.base+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("GET %s (key %q) = %d, want %d", c.path, c.key, resp.StatusCode, c.status)
		}
	}
}

// TestMetricsAddress: with ALICIA_GATEWAY_METRICS_ADDR, /metrics is served
// there and no longer on the address clients reach.
func TestMetricsAddress(t *testing.T) {
	addr := testkit.FreeAddr(t)
	s := newStack(t, func(o *stackOptions) { o.gateway = func(c *gateway.Config) { c.MetricsAddr = addr } })
	status := func(u string) int {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(s.base + "/metrics"); got != http.StatusNotFound {
		t.Fatalf("/metrics on the clients' address: %d, want 404", got)
	}
	for _, p := range []string{"/metrics", "/livez"} {
		if got := status("http://" + addr + p); got != http.StatusOK {
			t.Fatalf("%s on the metrics address: %d", p, got)
		}
	}
}

package text_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

const (
	aliceKey = "alice-e2e-key-0123456789"
	bobKey   = "bob-e2e-key-0123456789ab"
)

// stack is the whole text path in one process: embedded JetStream, a fresh
// Postgres database, and the real persistence, gateway, llm and memory
// services; the model servers are fakes speaking the OpenAI wire format
// (chat for the llm, chat + embeddings for memory).
type stack struct {
	t    testing.TB
	base string // http://127.0.0.1:port
	ws   string // ws://127.0.0.1:port/v1/ws
	nc   *nats.Conn
	js   jetstream.JetStream
	pool *pgxpool.Pool
	chat *fakeopenai.Server // the llm's model
	mem  *fakeopenai.Server // the memory service's embeddings and extraction model
}

type options struct {
	llm     func(*llm.Config)
	memory  func(*memory.Config)
	gateway func(*gateway.Config)
	// unrecorded: the fake models keep no requests (a soak's would grow
	// with every turn's whole history).
	unrecorded bool
	// chat, when set, is the fake LLM's answer and timing (default: a
	// short sentence, at once).
	chat *chatModel
	log  zerolog.Logger
	// reverse starts the services against an empty database (no schema, no
	// pgvector) in the opposite order of their dependencies — gateway, llm,
	// memory, and persistence (which applies the migrations) last — after
	// waitingFor has seen each of the first three wait for the schema.
	reverse    bool
	waitingFor func(services ...string)
}

// chatModel is what the fake LLM answers and how fast.
type chatModel struct {
	answer  string
	profile fakeopenai.Profile
}

func newStack(t testing.TB, o options) *stack {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	pgURL := pgtest.NewURL(t)
	if o.reverse {
		pgURL = pgtest.NewEmptyURL(t)
	}
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var rec []fakeopenai.Option
	if o.unrecorded {
		rec = append(rec, fakeopenai.WithoutRecording())
	}
	chatOpts := []fakeopenai.Option{fakeopenai.WithFallback(fakeopenai.Text("I have nothing scripted for that."))}
	if o.chat != nil {
		chatOpts = []fakeopenai.Option{fakeopenai.WithFallback(fakeopenai.Text(o.chat.answer)), fakeopenai.WithProfile(o.chat.profile)}
	}
	chat := fakeopenai.New(t, slices.Concat(rec, chatOpts)...)
	mem := fakeopenai.New(t, append(rec, fakeopenai.WithFallback(fakeopenai.Text(`{"memories": []}`)))...)
	log := o.log
	if !o.reverse {
		log = testkit.Log()
		persistencetest.Start(t, ns.ClientURL(), pgURL) // stopped after the services below
	}

	// Each service runs until the test ends; the ones started last stop first.
	run := func(name string, f func(context.Context) error) { testkit.Go(t, name, f) }
	var services []func()

	mcfg := memory.DefaultConfig()
	mcfg.NATSURL, mcfg.PostgresURL = ns.ClientURL(), pgURL
	mcfg.EmbeddingURL, mcfg.EmbeddingModel = mem.URL(), "fake-embed"
	mcfg.LLMURL, mcfg.LLMModel = mem.URL(), "fake-extract"
	if o.memory != nil {
		o.memory(&mcfg)
	}
	services = append(services, func() {
		run("memory", func(ctx context.Context) error {
			return memory.Run(ctx, mcfg, log.With().Str("service", "memory").Logger())
		})
	})

	lcfg := llm.DefaultConfig()
	lcfg.Titles = false // its requests would take the fakes' scripted answers
	lcfg.NATSURL, lcfg.PostgresURL, lcfg.LLMURL, lcfg.Model = ns.ClientURL(), pgURL, chat.URL(), "fake-chat"
	lcfg.Timeout, lcfg.RetryBackoff, lcfg.BreakerCooldown = 2*time.Second, 10*time.Millisecond, 300*time.Millisecond
	lcfg.Partitions, lcfg.ShutdownGrace = 8, 0
	lcfg.MetricsAddr = ""
	if o.llm != nil {
		o.llm(&lcfg)
	}
	services = append(services, func() {
		run("llm", func(ctx context.Context) error { return llm.Run(ctx, lcfg, log.With().Str("service", "llm").Logger()) })
	})

	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL = "127.0.0.1:0", ns.ClientURL(), pgURL
	gcfg.APIKeys = "alice:" + aliceKey + ",bob:" + bobKey
	gcfg.RateLimit = 10000
	if o.gateway != nil {
		o.gateway(&gcfg)
	}
	addr := make(chan string, 1)
	services = append(services, func() {
		run("gateway", func(ctx context.Context) error {
			return gateway.Run(ctx, gcfg, log.With().Str("service", "gateway").Logger(), func(a string) { addr <- a })
		})
	})
	if o.reverse {
		slices.Reverse(services)
	}
	for _, start := range services {
		start()
	}
	if o.reverse {
		o.waitingFor("gateway", "llm", "memory")
		persistencetest.Start(t, ns.ClientURL(), pgURL) // stopped first
	}
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not start")
	}
	s := &stack{t: t, base: "http://" + a, ws: "ws://" + a + "/v1/ws", nc: nc, js: js, pool: pool, chat: chat, mem: mem}
	// Ready: memory answers, llm has its turn consumers.
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := rpc.MemorySearch(ctx, nc, rpc.MemorySearchRequest{UserID: "nobody", Query: "ready?"}); err != nil {
			return err
		}
		_, err := js.Consumer(ctx, "LLM_TURNS", fmt.Sprintf("llm-p%d", lcfg.Partitions-1))
		return err
	}, "stack ready")
	return s
}

// client is a WebSocket client of the gateway speaking msgpack envelopes.
type client struct {
	t      testing.TB
	c      *websocket.Conn
	cid    string
	next   int32
	lastIn int32 // last server stanza id received
}

func (s *stack) dial(t testing.TB, key string) *client {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), s.ws+"?token="+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &client{t: t, c: c, next: 1}
}

// open dials and configures a new conversation (cid "") or resumes one.
func (s *stack) open(t testing.TB, key, cid string, lastSeen int32, features ...protocol.ConfigurationFeaturesElem) *client {
	t.Helper()
	c := s.dial(t, key)
	if features == nil {
		features = []protocol.ConfigurationFeaturesElem{"streaming", "reasoning_steps", "tool_use"}
	}
	cfg := &protocol.Configuration{Features: features, ClientVersion: protocol.Ptr("e2e/1")}
	if cid != "" {
		cfg.ConversationID = &cid
	}
	if lastSeen != 0 {
		cfg.LastSequenceSeen = &lastSeen
	}
	c.send(cfg)
	if cid == "" {
		reply := c.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeConfiguration })
		c.cid = reply.ConversationID
	} else {
		c.cid = cid
	}
	return c
}

func (c *client) send(body protocol.Body) {
	c.t.Helper()
	c.sendRaw(protocol.Envelope{StanzaID: c.next, ConversationID: c.cid, Type: body.MessageType(), Body: body})
}

func (c *client) sendRaw(env protocol.Envelope) {
	c.t.Helper()
	b, err := protocol.Encode(env)
	if err != nil {
		c.t.Fatal(err)
	}
	c.next++
	if err := c.c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		c.t.Fatal(err)
	}
}

// say sends a UserMessage and returns its id.
func (c *client) say(text string) string {
	id := protocol.NewID("am")
	c.send(&protocol.UserMessage{ID: id, ConversationID: c.cid, Content: text, Timestamp: protocol.Ptr(time.Now().UnixMilli())})
	return id
}

func (c *client) recv(timeout time.Duration) (protocol.Envelope, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, b, err := c.c.Read(ctx)
	if err != nil {
		return protocol.Envelope{}, err
	}
	env, err := protocol.Decode(b)
	if err != nil {
		return env, err
	}
	if env.StanzaID < 0 {
		c.lastIn = env.StanzaID
	}
	return env, nil
}

// until reads envelopes until match, returning it; it fails after 15 s.
func (c *client) until(match func(protocol.Envelope) bool) protocol.Envelope {
	c.t.Helper()
	_, env := c.collect(match)
	return env
}

// collect returns every envelope read up to and including the match.
func (c *client) collect(match func(protocol.Envelope) bool) ([]protocol.Envelope, protocol.Envelope) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got []protocol.Envelope
	for {
		env, err := c.recv(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting: %v (after %d envelopes: %s)", err, len(got), typesOf(got))
		}
		got = append(got, env)
		if match(env) {
			return got, env
		}
	}
}

// answer reads one whole streamed answer to user message uid.
func (c *client) answer(uid string) (*protocol.StartAnswer, []*protocol.AssistantSentence, []protocol.Envelope) {
	c.t.Helper()
	var start *protocol.StartAnswer
	envs, _ := c.collect(func(e protocol.Envelope) bool {
		switch b := e.Body.(type) {
		case *protocol.StartAnswer:
			if b.PreviousID == uid {
				start = b
			}
		case *protocol.AssistantSentence:
			return start != nil && b.PreviousID == start.ID && b.IsFinal != nil && *b.IsFinal
		case *protocol.ErrorMessage:
			c.t.Fatalf("ErrorMessage %d: %s", b.Code, b.Message)
		}
		return false
	})
	var sentences []*protocol.AssistantSentence
	for _, e := range envs {
		if b, ok := e.Body.(*protocol.AssistantSentence); ok && b.PreviousID == start.ID {
			sentences = append(sentences, b)
		}
	}
	return start, sentences, envs
}

func isFinal(e protocol.Envelope) bool {
	b, ok := e.Body.(*protocol.AssistantSentence)
	return ok && b.IsFinal != nil && *b.IsFinal
}

func typesOf(envs []protocol.Envelope) string {
	var names []string
	for _, e := range envs {
		names = append(names, e.Type.String())
	}
	return strings.Join(names, ", ")
}

// textOf joins sentence texts as persistence assembles the message contents.
func textOf(ss []*protocol.AssistantSentence) string {
	var parts []string
	for _, s := range ss {
		if s.Text != "" {
			parts = append(parts, s.Text)
		}
	}
	return strings.Join(parts, " ")
}

// row polls Postgres until query returns a row for which ok holds.
func (s *stack) eventually(what string, check func(ctx context.Context) error) {
	s.t.Helper()
	testkit.EventuallyNoError(s.t, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return check(ctx)
	}, "%s", what)
}

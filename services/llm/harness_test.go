package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/calc"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

const testUser = "user-1"

// harness is a real JetStream server, a real Postgres database with the
// persistence service applying the stream, and a fake model backend; llm
// replicas are started on it by each test.
type harness struct {
	t     testing.TB
	ns    *server.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	pub   *bus.Publisher
	pool  *pgxpool.Pool
	pgURL string
	fake  *fakeopenai.Server

	mu      sync.Mutex
	stanzas map[string]int32
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(t.Context(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	pgURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := &harness{t: t, ns: ns, nc: nc, js: js, pub: bus.NewPublisher(js), pool: pool, pgURL: pgURL,
		fake: fakeopenai.New(t), stanzas: map[string]int32{}}
	persistencetest.Start(t, ns.ClientURL(), pgURL)
	return h
}

// config is an llm configuration for tests: quick retries and timeouts.
func (h *harness) config(fake *fakeopenai.Server) llm.Config {
	cfg := llm.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL, cfg.LLMURL, cfg.Model = h.ns.ClientURL(), h.pgURL, fake.URL(), "fake-chat"
	cfg.Timeout, cfg.RetryBackoff, cfg.BreakerCooldown = 2*time.Second, 10*time.Millisecond, 300*time.Millisecond
	cfg.Partitions, cfg.AckWait, cfg.ShutdownGrace = 8, 2*time.Second, 0
	cfg.Toolbox = newToolbox()
	// No judge: its requests would take the answers scripted on the fake
	// chat model. The judge's tests give it a judge model of its own (judged).
	cfg.Judge.Sample = 0
	// No titles either, for the same reason (TestTitles turns them on).
	cfg.Titles = false
	return cfg
}

// replica runs an llm service until the test ends or stop is called.
func (h *harness) replica(cfg llm.Config) (stop func()) {
	h.t.Helper()
	svc := testkit.Go(h.t, "llm", func(ctx context.Context) error { return llm.Run(ctx, cfg, testkit.Log()) })
	stop = svc.Stop
	// Ready once its turn consumers exist.
	testkit.EventuallyNoError(h.t, 10*time.Second, func() error {
		_, err := h.js.Consumer(context.Background(), "LLM_TURNS", fmt.Sprintf("llm-p%d", cfg.Partitions-1))
		return err
	}, "llm consumers")
	return stop
}

// conversation starts a conversation with a Configuration (features nil: the
// client does not say; a list: exactly those).
func (h *harness) conversation(features ...protocol.ConfigurationFeaturesElem) string {
	cid := protocol.NewID("ac")
	cfg := &protocol.Configuration{ConversationID: &cid, ClientVersion: protocol.Ptr("llm-test/1")}
	if features != nil {
		cfg.Features = features
	}
	h.client(cid, cfg)
	return cid
}

// client publishes a client envelope as an edge would: next stanza id,
// the user in meta.
func (h *harness) client(cid string, body protocol.Body) uint64 {
	h.t.Helper()
	h.mu.Lock()
	h.stanzas[cid]++
	stanza := h.stanzas[cid]
	h.mu.Unlock()
	ack, err := h.pub.PublishClient(context.Background(), protocol.Envelope{StanzaID: stanza, ConversationID: cid,
		Type: body.MessageType(), Meta: map[string]any{edge.MetaUserID: testUser}, Body: body})
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// say sends a user message and returns its id.
func (h *harness) say(cid, text string) string {
	id := protocol.NewID("am")
	h.client(cid, &protocol.UserMessage{ID: id, ConversationID: cid, Content: text})
	return id
}

// seen is one envelope of a conversation in stream order.
type seen = natstest.Seen

// watcher collects every envelope of one conversation in stream order.
type watcher struct{ *natstest.Recorder }

func (h *harness) watch(cid string) *watcher {
	h.t.Helper()
	return &watcher{natstest.Record(h.t, h.js, bus.StreamConversations, subjects.Conversation(cid))}
}

func (w *watcher) all() []seen { return w.All() }

// until waits for cond over everything seen so far.
func (w *watcher) until(t testing.TB, timeout time.Duration, what string, cond func([]seen) bool) []seen {
	t.Helper()
	return w.Until(t, timeout, what, cond)
}

func bodies[T protocol.Body](envs []seen) []T { return natstest.Bodies[T](envs) }

// answerOf returns the StartAnswer for user message uid (nil if none yet).
func answerOf(envs []seen, previousID string) *protocol.StartAnswer {
	for _, b := range bodies[*protocol.StartAnswer](envs) {
		if b.PreviousID == previousID {
			return b
		}
	}
	return nil
}

func sentencesOf(envs []seen, aid string) []*protocol.AssistantSentence {
	var out []*protocol.AssistantSentence
	for _, b := range bodies[*protocol.AssistantSentence](envs) {
		if b.PreviousID == aid {
			out = append(out, b)
		}
	}
	return out
}

func finished(envs []seen, aid string) bool {
	for _, s := range sentencesOf(envs, aid) {
		if s.IsFinal != nil && *s.IsFinal {
			return true
		}
	}
	return false
}

// answered waits for the complete streamed answer to user message uid.
func (w *watcher) answered(t testing.TB, uid string) (*protocol.StartAnswer, []*protocol.AssistantSentence, []seen) {
	t.Helper()
	var sa *protocol.StartAnswer
	envs := w.until(t, 15*time.Second, "answer to "+uid, func(envs []seen) bool {
		sa = answerOf(envs, uid)
		return sa != nil && finished(envs, sa.ID)
	})
	return sa, sentencesOf(envs, sa.ID), envs
}

// row reads an assistant or user message row once persistence has it in the wanted state.
type row struct {
	role, contents, status string
	previous               *string
	interrupted            bool
}

func (h *harness) row(t testing.TB, id string, cond func(row) bool) row {
	t.Helper()
	var r row
	testkit.Eventually(t, 10*time.Second, func() bool {
		err := h.pool.QueryRow(context.Background(), `SELECT message_role::text, contents, completion_status::text, previous_id, interrupted_at IS NOT NULL
			FROM alicia_messages WHERE id = $1`, id).Scan(&r.role, &r.contents, &r.status, &r.previous, &r.interrupted)
		return err == nil && cond(r)
	}, "row %s", id)
	return r
}

func (h *harness) tip(cid string) string {
	var tip *string
	_ = h.pool.QueryRow(context.Background(), `SELECT tip_message_id FROM alicia_conversations WHERE id = $1`, cid).Scan(&tip)
	if tip == nil {
		return ""
	}
	return *tip
}

// toolbox is a small in-test tool registry: a calculator on pkg/calc, a
// tool that always fails, and one that outlives its timeout.
type toolbox struct {
	calls atomic.Int32
}

func newToolbox() *toolbox { return &toolbox{} }

func (b *toolbox) Available(context.Context) []tools.Spec {
	obj := func(prop string) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{prop: map[string]any{"type": "string"}}, "required": []string{prop}}
	}
	return []tools.Spec{
		{Name: "calculator", Description: "Evaluates an arithmetic expression.", Parameters: obj("expression"), Source: "builtin"},
		{Name: "broken", Description: "Always fails.", Parameters: obj("x"), Source: "builtin"},
		{Name: "sleepy", Description: "Takes too long.", Parameters: obj("x"), Source: "builtin"},
	}
}

func (b *toolbox) Call(ctx context.Context, name string, _ tools.Invocation, args map[string]any) (any, error) {
	b.calls.Add(1)
	switch name {
	case "calculator":
		expr, ok := args["expression"].(string)
		if !ok {
			return nil, fmt.Errorf("%w: expression must be a string", tools.ErrInvalidParameters)
		}
		v, err := calc.Eval(expr)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", tools.ErrInvalidParameters, err)
		}
		return map[string]any{"expression": expr, "result": v}, nil
	case "broken":
		return nil, errors.New("the broken tool is broken")
	case "sleepy":
		ctx, cancel := context.WithTimeout(ctx, b.Timeout(name))
		defer cancel()
		<-ctx.Done()
		return nil, fmt.Errorf("sleepy: %w", ctx.Err())
	}
	return nil, fmt.Errorf("%w: %q", tools.ErrUnknownTool, name)
}

func (b *toolbox) Timeout(name string) time.Duration {
	if name == "sleepy" {
		return 100 * time.Millisecond
	}
	return 2 * time.Second
}

// proxy forwards TCP to target until killed: a replica connected through it
// loses its NATS connection at once, as when its process dies.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(p.kill)
	return p
}

func (p *proxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
		go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
	}
}

func (p *proxy) kill() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

package memory_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

const metaUser = "alicia.user_id"

// stack is NATS, Postgres, the real persistence service and the memory
// service under test, with a fake OpenAI-compatible backend.
type stack struct {
	t    *testing.T
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *bus.Publisher
	pool *pgxpool.Pool // the test's own (read-write) view
	ai   *fakeopenai.Server
	cfg  memory.Config
	// refused are the CONVERSATIONS sequences persistence must dead-letter
	// (noDeadLetters checks they were, and that nothing else was).
	refused map[uint64]bool
}

type stackOptions struct {
	noEmbeddings bool
	noLLM        bool
	fake         []fakeopenai.Option
	config       func(*memory.Config)
	replicas     int // memory services on the same NATS and Postgres (default 1)
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	pgURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ai := fakeopenai.New(t, o.fake...)
	persistencetest.Start(t, ns.ClientURL(), pgURL) // stopped after memory

	cfg := memory.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL = ns.ClientURL(), pgURL
	if !o.noEmbeddings {
		cfg.EmbeddingURL, cfg.EmbeddingModel = ai.URL(), "fake-embedding"
	}
	if !o.noLLM {
		cfg.LLMURL, cfg.LLMModel = ai.URL(), "fake-chat"
	}
	cfg.EmbeddingTimeout = 2 * time.Second
	if o.config != nil {
		o.config(&cfg)
	}
	svc := testkit.Go(t, "memory", func(ctx context.Context) error { return memory.Run(ctx, cfg, testLogger(t)) })
	for i := 1; i < o.replicas; i++ {
		testkit.Go(t, fmt.Sprintf("memory replica %d", i+1), func(ctx context.Context) error { return memory.Run(ctx, cfg, testLogger(t)) })
	}
	s := &stack{t: t, nc: nc, js: js, pub: bus.NewPublisher(js), pool: pool, ai: ai, cfg: cfg}
	t.Cleanup(s.noDeadLetters)
	// Ready when both services answer.
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		select {
		case <-svc.Exited():
			t.Fatalf("memory stopped: %v", svc.Err())
		default:
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := rpc.MemorySearch(rctx, nc, rpc.MemorySearchRequest{UserID: "probe"})
		return err
	}, "memory answering")
	return s
}

func (s *stack) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	s.t.Cleanup(cancel)
	return ctx
}

// act calls memory.action.
func (s *stack) act(user string, action protocol.MemoryActionAction, m *protocol.MemoryActionMemory) (rpc.MemoryActionResponse, error) {
	s.t.Helper()
	return rpc.MemoryAct(s.ctx(), s.nc, rpc.MemoryActionRequest{UserID: user, Action: protocol.MemoryAction{
		ID: protocol.NewID("amact"), Action: action, Memory: m, Timestamp: time.Now().UnixMilli()}})
}

// create makes a memory through memory.action and returns its id.
func (s *stack) create(user, content string, tags []string, importance float64) string {
	s.t.Helper()
	resp, err := s.act(user, protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{Content: content, Tags: tags, Importance: &importance})
	if err != nil {
		s.t.Fatalf("create %q: %v", content, err)
	}
	return resp.MemoryID
}

func (s *stack) search(req rpc.MemorySearchRequest) rpc.MemorySearchResponse {
	s.t.Helper()
	resp, err := rpc.MemorySearch(s.ctx(), s.nc, req)
	if err != nil {
		s.t.Fatalf("search %+v: %v", req, err)
	}
	return resp
}

// row is what the database holds for one memory.
type row struct {
	UserID, Content, Model, Source, SourceMessage string
	Tags                                          []string
	Importance                                    float64
	Pinned, Archived, Deleted, HasEmbedding       bool
}

func (s *stack) row(id string) (row, bool) {
	s.t.Helper()
	var r row
	err := s.pool.QueryRow(context.Background(), `
		SELECT COALESCE(user_id, ''), content, COALESCE(embeddings_info->>'model', ''), COALESCE(source_type, ''),
			COALESCE(source_message_id, ''), tags, importance, pinned, archived, deleted_at IS NOT NULL, embeddings IS NOT NULL
		FROM alicia_memory WHERE id = $1`, id).
		Scan(&r.UserID, &r.Content, &r.Model, &r.Source, &r.SourceMessage, &r.Tags, &r.Importance, &r.Pinned, &r.Archived, &r.Deleted, &r.HasEmbedding)
	if err != nil {
		return row{}, false
	}
	return r, true
}

// similarity is the stored embedding's cosine similarity to text's fake embedding.
func (s *stack) similarity(id, text string) float64 {
	s.t.Helper()
	var sim float64
	vec := fakeopenai.Embed(text, memory.Dimensions)
	if err := s.pool.QueryRow(context.Background(), `SELECT 1 - (embeddings <=> $2::real[]::vector) FROM alicia_memory WHERE id = $1`, id, vec).Scan(&sim); err != nil {
		s.t.Fatalf("similarity of %s: %v", id, err)
	}
	return sim
}

func (s *stack) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// listen collects the server envelopes of conversation cid.
func (s *stack) listen(cid string) <-chan protocol.Envelope {
	s.t.Helper()
	ch := make(chan protocol.Envelope, 64)
	sub, err := s.nc.Subscribe("alicia.conv."+cid+".server.>", func(m *nats.Msg) {
		env, err := protocol.Decode(m.Data)
		if err == nil {
			ch <- env
		}
	})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

// next returns the next envelope of type typ on ch, skipping others.
func next[T protocol.Body](t *testing.T, ch <-chan protocol.Envelope) T {
	t.Helper()
	var zero T
	timeout := time.After(15 * time.Second)
	for {
		select {
		case env := <-ch:
			if b, ok := env.Body.(T); ok {
				return b
			}
		case <-timeout:
			t.Fatalf("no %T within 15s", zero)
			return zero
		}
	}
}

// client publishes a client envelope in cid as user; it returns the stream sequence.
func (s *stack) client(cid, user string, stanza int32, body protocol.Body) uint64 {
	s.t.Helper()
	env := protocol.New(cid, body)
	env.StanzaID = stanza
	env.Meta = map[string]any{metaUser: user}
	ack, err := s.pub.PublishClient(context.Background(), env)
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

// server publishes a server envelope in cid.
func (s *stack) server(cid string, body protocol.Body) uint64 {
	s.t.Helper()
	ack, err := s.pub.PublishServer(context.Background(), protocol.New(cid, body), "")
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

// testLogger logs to the test when ALICIA_TEST_LOG is set.
func testLogger(t *testing.T) zerolog.Logger {
	if os.Getenv("ALICIA_TEST_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// noDeadLetters fails the test when a consumer gave up on an envelope other
// than the refused ones, or did not give up on a refused one (waiting a
// little for persistence to get to it).
func (s *stack) noDeadLetters() {
	ctx := context.Background()
	st, err := s.js.Stream(ctx, bus.StreamDeadLetter)
	if err != nil {
		s.t.Errorf("dead letters: %v", err)
		return
	}
	var unexpected []string
	err = testkit.CheckFor(10*time.Second, testkit.PollInterval, func() error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		unexpected = unexpected[:0]
		found := map[uint64]bool{}
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			orig, _ := strconv.ParseUint(m.Header.Get(bus.HeaderDLQSequence), 10, 64)
			if m.Header.Get(bus.HeaderDLQStream) == bus.StreamConversations && s.refused[orig] {
				found[orig] = true
				continue
			}
			unexpected = append(unexpected, fmt.Sprintf("dead letter from %s: %s (%s)",
				m.Header.Get(bus.HeaderDLQConsumer), m.Header.Get(bus.HeaderDLQReason), m.Header.Get(bus.HeaderDLQSubject)))
		}
		for seq := range s.refused {
			if !found[seq] {
				return fmt.Errorf("envelope %d was not dead-lettered", seq)
			}
		}
		return nil
	})
	if err != nil {
		s.t.Error(err)
	}
	for _, u := range unexpected {
		s.t.Error(u)
	}
}

// refuse says persistence must dead-letter the envelope at seq.
func (s *stack) refuse(seq uint64) {
	if s.refused == nil {
		s.refused = map[uint64]bool{}
	}
	s.refused[seq] = true
}

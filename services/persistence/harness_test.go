package persistence_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/persistence"
)

// stack is a real JetStream server, a real Postgres database and a
// persistence service that can be stopped and started again.
type stack struct {
	t      testing.TB
	ns     *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	pub    *bus.Publisher
	pool   *pgxpool.Pool
	cfg    persistence.Config
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	// historyTimeout bounds how long history waits for its sequence (default 30s).
	historyTimeout time.Duration
}

func newStack(t testing.TB) *stack {
	t.Helper()
	return newStackWith(t, bus.DefaultStreams())
}

// newStackWith is newStack whose streams (made here, and ensured by
// persistence as it starts) have streams' settings.
func newStackWith(t testing.TB, streams bus.StreamsConfig) *stack {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	url := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := bus.EnsureStreams(context.Background(), js, streams); err != nil {
		t.Fatal(err)
	}
	cfg := persistence.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL, cfg.Streams = ns.ClientURL(), url, streams
	s := &stack{t: t, ns: ns, nc: nc, js: js, pub: bus.NewPublisher(js), pool: pool, cfg: cfg, historyTimeout: 30 * time.Second}
	t.Cleanup(s.stop)
	return s
}

func (s *stack) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- persistence.Run(ctx, s.cfg, testkit.Log()) }()
}

func (s *stack) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
		s.t.Errorf("persistence.Run: %v", err)
	}
	s.cancel = nil
}

// client publishes a client envelope and returns its stream sequence.
func (s *stack) client(cid string, stanza int32, body protocol.Body, meta map[string]any) uint64 {
	s.t.Helper()
	ack, err := s.pub.PublishClient(context.Background(), protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: body.MessageType(), Meta: meta, Body: body})
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

// server publishes a server envelope and returns its stream sequence.
func (s *stack) server(cid string, body protocol.Body, meta map[string]any) uint64 {
	s.t.Helper()
	ack, err := s.pub.PublishServer(context.Background(), protocol.Envelope{ConversationID: cid, Type: body.MessageType(), Meta: meta, Body: body}, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

// history calls history.get, waiting until seq is applied. The service may
// still be starting (no responders) or catching up (504): both are retried.
func (s *stack) history(cid string, seq uint64) rpc.HistoryResponse {
	s.t.Helper()
	var resp rpc.HistoryResponse
	err := testkit.CheckFor(s.historyTimeout, testkit.PollInterval, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		resp, err = rpc.History(ctx, s.nc, rpc.HistoryRequest{ConversationID: cid, MinSequence: seq})
		if err != nil && !errors.Is(err, rpc.ErrNoResponders) && !rpc.IsCode(err, rpc.CodeTimeout) {
			s.t.Fatalf("history.get %s ≥ %d: %v", cid, seq, err)
		}
		return err
	})
	if err != nil {
		s.t.Fatalf("history.get %s ≥ %d: %v", cid, seq, err)
	}
	return resp
}

// applied waits until persistence has applied stream up to seq.
func (s *stack) applied(stream string, seq uint64) {
	s.t.Helper()
	testkit.EventuallyNoError(s.t, s.historyTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return rpc.WaitApplied(ctx, s.nc, stream, seq)
	}, "persistence.applied %s %d", stream, seq)
}

// system publishes an envelope on alicia.sys.{type} and returns its SYSTEM stream sequence.
func (s *stack) system(body protocol.Body, meta map[string]any) uint64 {
	s.t.Helper()
	ack, err := s.pub.PublishSystem(context.Background(), protocol.Envelope{Type: body.MessageType(), Meta: meta, Body: body}, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

func (s *stack) queryInt(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func ptr[T any](v T) *T { return &v }

func subjectsClient(env protocol.Envelope) string {
	return subjects.Client(env.ConversationID, env.Type)
}
func subjectsServer(env protocol.Envelope) string {
	return subjects.Server(env.ConversationID, env.Type)
}

package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
)

type env struct {
	srv *server.Server
	js  jetstream.JetStream
	pub *bus.Publisher
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, s))
	if err := bus.EnsureStreams(t.Context(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return &env{srv: s, js: js, pub: bus.NewPublisher(js)}
}

func (e *env) say(t *testing.T, cid, id string, stanza int32) uint64 {
	t.Helper()
	ack, err := e.pub.PublishClient(t.Context(), protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: id, ConversationID: cid, Content: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// replica runs a Consumer on its own connection until the returned stop is
// called (or the test ends).
func (e *env) replica(t *testing.T, cfg queue.Config, h queue.Handler) (stop func()) {
	t.Helper()
	js := natstest.JetStream(t, natstest.Connect(t, e.srv))
	q, err := queue.Ensure(t.Context(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &queue.Consumer{Queue: q, Handler: h, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver,
		Backoff: func(uint64) time.Duration { return 10 * time.Millisecond }, FetchWait: time.Second, Log: zerolog.Nop()}
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

type record struct {
	mu    sync.Mutex
	turns []queue.Turn
	by    []string
}

func (r *record) add(who string, t queue.Turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = append(r.turns, t)
	r.by = append(r.by, who)
}

func (r *record) snapshot() ([]queue.Turn, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]queue.Turn(nil), r.turns...), append([]string(nil), r.by...)
}

func TestPartitionsAndSourceSequence(t *testing.T) {
	e := newEnv(t)
	// Before the stream exists: not a turn (a first start must not answer history).
	e.say(t, "ac_old", "am_old", 1)
	cfg := queue.Config{Partitions: 4, AckWait: 5 * time.Second, MaxDeliver: 5}
	var rec record
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("a", tu); return nil })

	seqs := map[string]uint64{}
	for i, cid := range []string{"ac_a", "ac_b", "ac_c", "ac_d", "ac_e", "ac_f", "ac_a", "ac_b"} {
		seqs[cid+":"+string(rune('0'+i))] = e.say(t, cid, "am_"+cid[3:]+string(rune('0'+i)), int32(i+1))
	}
	// Not turns: other client types and server envelopes.
	if _, err := e.pub.PublishClient(t.Context(), protocol.New("ac_a", &protocol.Configuration{})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pub.PublishServer(t.Context(), protocol.New("ac_a", &protocol.StartAnswer{ID: "am_x", PreviousID: "am_a0", ConversationID: "ac_a"}), ""); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 8 }, "8 turns")

	turns, _ := rec.snapshot()
	part := map[string]int{}
	for _, tu := range turns {
		um, ok := tu.Env.Body.(*protocol.UserMessage)
		if !ok || tu.ConversationID == "ac_old" {
			t.Fatalf("unexpected turn %+v", tu)
		}
		key := tu.ConversationID + ":" + um.ID[len(um.ID)-1:]
		if tu.Sequence != seqs[key] || tu.Delivered != 1 {
			t.Errorf("%s: sequence %d delivered %d, want CONVERSATIONS sequence %d, first delivery", key, tu.Sequence, tu.Delivered, seqs[key])
		}
		if p, ok := part[tu.ConversationID]; ok && p != tu.Partition {
			t.Errorf("%s in partitions %d and %d", tu.ConversationID, p, tu.Partition)
		}
		part[tu.ConversationID] = tu.Partition
	}
	used := map[int]bool{}
	for _, p := range part {
		used[p] = true
	}
	if len(used) < 2 {
		t.Errorf("6 conversations all in partition(s) %v", used)
	}

	// A second start updates the stream and keeps its start: still no old turns.
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("b", tu); return nil })
	e.say(t, "ac_z", "am_z", 1)
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 9 }, "the turn after the restart")
	if turns, _ := rec.snapshot(); turns[8].ConversationID != "ac_z" {
		t.Fatalf("after restart got %+v", turns[8])
	}
}

// One partition, two replicas: turns never overlap and keep stream order,
// and both replicas take turns.
func TestOneAtATimeAcrossReplicas(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 5 * time.Second, MaxDeliver: 5}
	var rec record
	var active, overlaps atomic.Int32
	handler := func(who string) queue.Handler {
		return func(ctx context.Context, tu queue.Turn) error {
			if active.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer active.Add(-1)
			rec.add(who, tu)
			select { // a turn takes a while
			case <-time.After(15 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}
	}
	e.replica(t, cfg, handler("a"))
	e.replica(t, cfg, handler("b"))
	var want []uint64
	for i := range 12 {
		cid := []string{"ac_1", "ac_2", "ac_3"}[i%3]
		want = append(want, e.say(t, cid, "am_"+string(rune('a'+i)), int32(i+1)))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 12 }, "12 turns")
	turns, by := rec.snapshot()
	for i, tu := range turns {
		if tu.Sequence != want[i] {
			t.Fatalf("turn %d has sequence %d, want %d (stream order)", i, tu.Sequence, want[i])
		}
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d turns of one partition overlapped", n)
	}
	count := map[string]int{}
	for _, w := range by {
		count[w]++
	}
	if count["a"] == 0 || count["b"] == 0 {
		t.Fatalf("turns by replica = %v, want both", count)
	}
	t.Logf("turns by replica: %v", count)
}

// A replica that dies mid-turn without acking: the turn is redelivered to
// another after AckWait. A replica that heartbeats keeps its turn even when
// it runs longer than AckWait.
func TestRedelivery(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 600 * time.Millisecond, MaxDeliver: 5}
	crashNC := natstest.Connect(t, e.srv)
	q, err := queue.Ensure(t.Context(), natstest.JetStream(t, crashNC), cfg)
	if err != nil {
		t.Fatal(err)
	}
	seq1 := e.say(t, "ac_1", "am_1", 1)
	if _, err := q.Consumer(0).Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	crashNC.Close() // the replica dies without ack or nak

	var rec record
	var started atomic.Int32
	handler := func(who string) queue.Handler {
		return func(ctx context.Context, tu queue.Turn) error {
			rec.add(who, tu)
			if started.Add(1) == 1 {
				select { // 2.5 × AckWait of work, kept alive by heartbeats
				case <-time.After(1500 * time.Millisecond):
				case <-ctx.Done():
				}
			}
			return nil
		}
	}
	e.replica(t, cfg, handler("b"))
	e.replica(t, cfg, handler("c"))
	testkit.Eventually(t, 5*time.Second, func() bool { return started.Load() == 1 }, "the dead replica's turn redelivered")
	seq2 := e.say(t, "ac_1", "am_2", 2)
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 2 }, "the next turn")
	turns, _ := rec.snapshot()
	if turns[0].Sequence != seq1 || turns[0].Delivered != 2 {
		t.Fatalf("first turn %+v, want sequence %d on its second delivery", turns[0], seq1)
	}
	if turns[1].Sequence != seq2 || turns[1].Delivered != 1 {
		t.Fatalf("second turn %+v, want sequence %d: a heartbeated turn must not be redelivered", turns[1], seq2)
	}
}

// A replica stopping gives its running turn back at once (no AckWait).
func TestShutdownGivesTurnBack(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 2, AckWait: 30 * time.Second, MaxDeliver: 5}
	var rec record
	stopA := e.replica(t, cfg, func(ctx context.Context, tu queue.Turn) error {
		rec.add("a", tu)
		<-ctx.Done() // runs until the replica stops
		return ctx.Err()
	})
	seq := e.say(t, "ac_1", "am_1", 1)
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 1 }, "replica a took the turn")
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("b", tu); return nil })
	start := time.Now()
	stopA()
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 2 }, "replica b resumed the turn")
	turns, by := rec.snapshot()
	if by[1] != "b" || turns[1].Sequence != seq || turns[1].Delivered != 2 {
		t.Fatalf("resumed %+v by %s", turns[1], by[1])
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s: the turn waited for AckWait instead of being given back", d)
	}
}

func TestSourceSequence(t *testing.T) {
	for _, c := range []struct {
		header string
		want   uint64
		ok     bool
	}{
		{"CONVERSATIONS 42 alicia.conv.*.client.user_message alicia.turns.x alicia.conv.ac_1.client.user_message abc", 42, true},
		{"CONVERSATIONS 7", 7, true},
		{"OTHER 42 > > x", 0, false},
		{"CONVERSATIONS x", 0, false},
		{"CONVERSATIONS 0", 0, false},
		{"", 0, false},
	} {
		t.Run(c.header, func(t *testing.T) {
			got, err := queue.SourceSequence(c.header)
			if (err == nil) != c.ok || got != c.want {
				t.Fatalf("= %d, %v", got, err)
			}
			if err != nil && !errors.Is(err, queue.ErrNoSource) {
				t.Fatalf("err = %v, want ErrNoSource", err)
			}
		})
	}
}

// Consumers live in memory (acked turns are deleted from the file stream):
// one lost with a server restart is recreated and its turns still come.
func TestLostConsumerIsRecreated(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 5 * time.Second, MaxDeliver: 5}
	var rec record
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("a", tu); return nil })
	e.say(t, "ac_1", "am_1", 1)
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 1 }, "first turn")
	if err := e.js.DeleteConsumer(t.Context(), queue.Stream, queue.ConsumerName(0)); err != nil {
		t.Fatal(err)
	}
	seq := e.say(t, "ac_1", "am_2", 2)
	// At least once: a turn whose ack was lost with the consumer comes again.
	testkit.Eventually(t, 10*time.Second, func() bool {
		tu, _ := rec.snapshot()
		return tu[len(tu)-1].Sequence == seq
	}, "turn after the consumer was lost")
	info, err := e.js.Stream(t.Context(), queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		si, err := info.Info(t.Context())
		return err == nil && si.State.Msgs == 0
	}, "acked turns deleted from the work queue")
}

// TestEnsureLeavesAFittingStreamAlone: replicas starting together must not
// update LLM_TURNS needlessly (nats-server races an update against the
// create of another stream).
func TestEnsureLeavesAFittingStreamAlone(t *testing.T) {
	e := newEnv(t)
	nc := natstest.Connect(t, e.srv)
	updates, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED." + queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := queue.Config{Partitions: 4, AckWait: 5 * time.Second, MaxDeliver: 5}
	for range 2 {
		if _, err := queue.Ensure(t.Context(), e.js, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := updates.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("LLM_TURNS was updated although it fits: %s", m.Data)
	}
}

package queue_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
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

func newEnv(t testing.TB) *env {
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

// diesHolding has a replica of partition 0 take the turn it says (the
// partition pinned to it) and die without acking or naking it; it returns
// the turn's sequence.
func (e *env) diesHolding(t *testing.T, cfg queue.Config, cid, id string, stanza int32) uint64 {
	t.Helper()
	nc := natstest.Connect(t, e.srv)
	q, err := queue.Ensure(t.Context(), natstest.JetStream(t, nc), cfg)
	if err != nil {
		t.Fatal(err)
	}
	seq := e.say(t, cid, id, stanza)
	if _, err := q.Consumer(0).Next(jetstream.FetchMaxWait(5*time.Second), jetstream.FetchPriorityGroup(queue.PriorityGroup)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	return seq
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
// TestConversationsInOrderAcrossReplicas: with two replicas on one
// partition, the partition's turns all go to the replica that holds it;
// turns of different conversations run at once, a conversation's one after
// the other in stream order.
func TestConversationsInOrderAcrossReplicas(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 5 * time.Second, MaxDeliver: 5}
	var rec record
	var mu sync.Mutex
	active := map[string]int{}
	overlaps, most, now := 0, 0, 0
	handler := func(who string) queue.Handler {
		return func(ctx context.Context, tu queue.Turn) error {
			mu.Lock()
			active[tu.ConversationID]++
			if active[tu.ConversationID] > 1 {
				overlaps++
			}
			now++
			most = max(most, now)
			mu.Unlock()
			rec.add(who, tu)
			select { // a turn takes a while
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
			mu.Lock()
			active[tu.ConversationID]--
			now--
			mu.Unlock()
			return nil
		}
	}
	e.replica(t, cfg, handler("a"))
	e.replica(t, cfg, handler("b"))
	want := map[string][]uint64{}
	for i := range 12 {
		cid := []string{"ac_1", "ac_2", "ac_3"}[i%3]
		want[cid] = append(want[cid], e.say(t, cid, "am_"+string(rune('a'+i)), int32(i+1)))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 12 }, "12 turns")
	turns, by := rec.snapshot()
	got := map[string][]uint64{}
	for _, tu := range turns {
		got[tu.ConversationID] = append(got[tu.ConversationID], tu.Sequence)
	}
	for cid, w := range want {
		if !slices.Equal(got[cid], w) {
			t.Fatalf("%s: turns in order %v, want %v (stream order)", cid, got[cid], w)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if overlaps != 0 {
		t.Fatalf("%d turns ran while another of their conversation ran", overlaps)
	}
	if most < 2 {
		t.Fatalf("at most %d turn ran at once: conversations waited for each other", most)
	}
	if slices.Contains(by, "a") && slices.Contains(by, "b") {
		t.Fatalf("turns by replica %v: the partition went to both at once", by)
	}
	t.Logf("at most %d turns at once, all on replica %s", most, by[0])
}

// TestNoHeadOfLineBlocking: a long answer does not hold up another
// conversation of its partition.
func TestNoHeadOfLineBlocking(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 5 * time.Second, MaxDeliver: 5}
	release := make(chan struct{})
	var rec record
	e.replica(t, cfg, func(ctx context.Context, tu queue.Turn) error {
		if tu.ConversationID == "ac_slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		rec.add("a", tu)
		return nil
	})
	e.say(t, "ac_slow", "am_1", 1)
	fast := e.say(t, "ac_fast", "am_2", 1)
	testkit.Eventually(t, 5*time.Second, func() bool {
		tu, _ := rec.snapshot()
		return len(tu) == 1 && tu[0].Sequence == fast
	}, "the other conversation's turn done while the long one runs")
	close(release)
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 2 }, "the long turn done")
}

// TestStopHandsWaitingTurnsOverInOrder: a replica stopping lets its running
// turn finish within the grace and gives the conversation's waiting turns
// back, which the other replica then runs in stream order.
func TestStopHandsWaitingTurnsOverInOrder(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 30 * time.Second, MaxDeliver: 5}
	started := make(chan struct{}, 10)
	finish := make(chan struct{})
	var rec record
	js := natstest.JetStream(t, natstest.Connect(t, e.srv))
	q, err := queue.Ensure(t.Context(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &queue.Consumer{Queue: q, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver, Grace: 10 * time.Second, FetchWait: time.Second, Log: zerolog.Nop(),
		Handler: func(ctx context.Context, tu queue.Turn) error {
			started <- struct{}{}
			<-finish
			rec.add("a", tu)
			return nil
		}}
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var want []uint64
	want = append(want, e.say(t, "ac_1", "am_1", 1))
	<-started
	want = append(want, e.say(t, "ac_1", "am_2", 2), e.say(t, "ac_1", "am_3", 3))
	testkit.EventuallyNoError(t, 5*time.Second, func() error {
		info, err := q.Consumer(0).Info(t.Context())
		if err != nil {
			return err
		}
		if info.NumAckPending != 3 {
			return errors.New("a holds " + strconv.Itoa(info.NumAckPending) + " turns")
		}
		return nil
	}, "a took the waiting turns")
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("b", tu); return nil })
	cancel() // a stops: its running turn may finish
	close(finish)
	<-done
	testkit.Eventually(t, 10*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 3 }, "three turns")
	turns, by := rec.snapshot()
	for i, tu := range turns {
		if tu.Sequence != want[i] {
			t.Fatalf("turn %d has sequence %d (by %s), want %d", i, tu.Sequence, by[i], want[i])
		}
	}
	if by[0] != "a" || by[1] != "b" || by[2] != "b" {
		t.Fatalf("turns by %v, want a, b, b", by)
	}
}

// A replica that dies mid-turn without acking: the turn is redelivered to
// another after AckWait. A replica that heartbeats keeps its turn even when
// it runs longer than AckWait.
func TestRedelivery(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 600 * time.Millisecond, MaxDeliver: 5, PinnedTTL: 1500 * time.Millisecond}
	seq1 := e.diesHolding(t, cfg, "ac_1", "am_1", 1)

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

// A replica stopping gives its running turn back at once (no AckWait), to
// the next replica, with one delivery more: a chain of replicas each taking
// the turn over and stopping while its pulls wait. (A pull the stopping
// replica gave up while the server still held it would swallow the turn
// given back, which then waited AckWait; one still running would take the
// turn back itself and count a delivery for nothing.)
func TestShutdownGivesTurnBack(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 2, AckWait: 30 * time.Second, MaxDeliver: 20}
	var rec record
	running := func(who string) queue.Handler {
		return func(ctx context.Context, tu queue.Turn) error {
			rec.add(who, tu)
			<-ctx.Done() // runs until the replica stops
			return ctx.Err()
		}
	}
	stop := e.replica(t, cfg, running("r0"))
	seq := e.say(t, "ac_1", "am_1", 1)
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 1 }, "replica r0 took the turn")
	const handovers = 8
	for i := 1; i <= handovers; i++ {
		who := "r" + strconv.Itoa(i)
		h := running(who)
		if i == handovers {
			h = func(_ context.Context, tu queue.Turn) error { rec.add(who, tu); return nil }
		}
		next := e.replica(t, cfg, h)
		start := time.Now()
		stop()
		testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == i+1 }, who+" resumed the turn")
		turns, by := rec.snapshot()
		if by[i] != who || turns[i].Sequence != seq || turns[i].Delivered != uint64(i+1) {
			t.Fatalf("handover %d: resumed %+v by %s, want delivery %d by %s", i, turns[i], by[i], i+1, who)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("handover %d took %s: the turn waited for AckWait instead of being given back", i, d)
		}
		stop = next
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

// TestOrphanedTurnRunsFirst: a replica holding a partition dies with a turn
// of a conversation unacknowledged; the conversation's next turn comes to
// the replica that takes the partition over before the orphan is
// redelivered (the pin expires before AckWait). It waits for the orphan:
// the turns run in stream order.
func TestOrphanedTurnRunsFirst(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 3 * time.Second, MaxDeliver: 5, PinnedTTL: 1500 * time.Millisecond}
	seq1 := e.diesHolding(t, cfg, "ac_1", "am_1", 1)
	seq2 := e.say(t, "ac_1", "am_2", 2)
	var rec record
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("b", tu); return nil })
	testkit.Eventually(t, 10*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 2 }, "both turns")
	turns, _ := rec.snapshot()
	if turns[0].Sequence != seq1 || turns[0].Delivered != 2 || turns[1].Sequence != seq2 {
		t.Fatalf("turns %+v, want %d (redelivered) then %d", turns, seq1, seq2)
	}
}

// TestPartitionsSpreadOverReplicas: a replica that held every partition
// alone gives some up when a second one comes, which then takes a share of
// the turns.
func TestPartitionsSpreadOverReplicas(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 8, AckWait: 5 * time.Second, MaxDeliver: 5}
	var rec record
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("a", tu); return nil })
	stanza := int32(0)
	round := func() map[string]int {
		t.Helper()
		stanza++
		before, _ := rec.snapshot()
		for i := range 40 {
			e.say(t, "ac_spread"+strconv.Itoa(i), "am_"+strconv.Itoa(int(stanza))+"_"+strconv.Itoa(i), stanza)
		}
		testkit.Eventually(t, 10*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == len(before)+40 }, "a round of 40 turns")
		_, by := rec.snapshot()
		n := map[string]int{}
		for _, w := range by[len(before):] {
			n[w]++
		}
		return n
	}
	if n := round(); n["a"] != 40 {
		t.Fatalf("alone, replica a ran %v", n)
	}
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("b", tu); return nil })
	var n map[string]int
	testkit.Eventually(t, 30*time.Second, func() bool {
		n = round()
		return n["b"] >= 8
	}, "replica b taking a share of the turns")
	t.Logf("a round of 40 turns once balanced: %v", n)
}

// TestEnsureUpgradesOneAtATimeConsumers: a partition consumer made by an
// earlier version (one turn in flight, no priority group) is updated in
// place to the pinned one.
func TestEnsureUpgradesOneAtATimeConsumers(t *testing.T) {
	e := newEnv(t)
	cfg := queue.Config{Partitions: 1, AckWait: 5 * time.Second, MaxDeliver: 5}
	if _, err := queue.Ensure(t.Context(), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	old := jetstream.ConsumerConfig{Durable: queue.ConsumerName(0), FilterSubject: "alicia.turns.0.>", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 5 * time.Second, MaxAckPending: 1, MaxDeliver: 5, DeliverPolicy: jetstream.DeliverAllPolicy, MemoryStorage: true, Replicas: 1}
	if err := e.js.DeleteConsumer(t.Context(), queue.Stream, old.Durable); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateConsumer(t.Context(), queue.Stream, old); err != nil {
		t.Fatal(err)
	}
	seq := e.say(t, "ac_1", "am_1", 1)
	var rec record
	e.replica(t, cfg, func(_ context.Context, tu queue.Turn) error { rec.add("a", tu); return nil })
	testkit.Eventually(t, 5*time.Second, func() bool { tu, _ := rec.snapshot(); return len(tu) == 1 && tu[0].Sequence == seq }, "the queued turn")
	c, err := e.js.Consumer(t.Context(), queue.Stream, old.Durable)
	if err != nil {
		t.Fatal(err)
	}
	got := c.CachedInfo().Config
	if got.PriorityPolicy != jetstream.PriorityPolicyPinned || got.MaxAckPending != queue.DefaultInFlight || !slices.Equal(got.PriorityGroups, []string{queue.PriorityGroup}) {
		t.Fatalf("consumer after Ensure: policy %v, max ack pending %d, groups %v", got.PriorityPolicy, got.MaxAckPending, got.PriorityGroups)
	}
}

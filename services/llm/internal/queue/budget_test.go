package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
)

// sayAs publishes a UserMessage of user.
func (e *env) sayAs(t testing.TB, user, cid, id string, stanza int32) uint64 {
	t.Helper()
	ack, err := e.pub.PublishClient(t.Context(), protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeUserMessage,
		Meta: map[string]any{edge.MetaUserID: user}, Body: &protocol.UserMessage{ID: id, ConversationID: cid, Content: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// budgetReplica runs a Consumer with a budget of cfg.PerUser turns per
// user (none when 0, as before the budget).
func (e *env) budgetReplica(t testing.TB, cfg queue.Config, h queue.Handler, giveUp func()) {
	t.Helper()
	js := natstest.JetStream(t, natstest.Connect(t, e.srv))
	q, err := queue.Ensure(t.Context(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := queue.EnsureBudget(ctx, js, cfg.PerUser, cfg.AckWait, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	c := &queue.Consumer{Queue: q, Handler: h, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver, Budget: b,
		Backoff: func(uint64) time.Duration { return 10 * time.Millisecond }, FetchWait: time.Second, Log: zerolog.Nop()}
	if giveUp != nil {
		c.GiveUp = func(context.Context, queue.Turn, error) { giveUp() }
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// flood is a handler whose turns of user "flood" each wait for a token,
// recording starts and ends in order.
type flood struct {
	mu      sync.Mutex
	events  []string // "start <user> <cid> <seq>", "end flood …"
	running map[string]int
	most    map[string]int
	tokens  chan struct{}
	order   map[string][]uint64
}

func newFlood() *flood {
	return &flood{running: map[string]int{}, most: map[string]int{}, tokens: make(chan struct{}, 1000), order: map[string][]uint64{}}
}

func (f *flood) handle(ctx context.Context, tu queue.Turn) error {
	f.mu.Lock()
	f.running[tu.User]++
	f.most[tu.User] = max(f.most[tu.User], f.running[tu.User])
	f.events = append(f.events, "start "+tu.User)
	f.order[tu.ConversationID] = append(f.order[tu.ConversationID], tu.Sequence)
	f.mu.Unlock()
	if tu.User == "flood" {
		select {
		case <-f.tokens:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	f.running[tu.User]--
	f.events = append(f.events, "end "+tu.User)
	f.mu.Unlock()
	return nil
}

func (f *flood) count(ev string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.events {
		if e == ev {
			n++
		}
	}
	return n
}

// TestFairTurns: one user floods a partition from many conversations (its
// turns run until the test lets each end). With its budget (2) it runs two
// turns at once however many it queued, so another user's turn starts while
// none of the flood's has ended; when the flood has as many turns running as
// the partition runs at once, the other user's turn starts as soon as one
// flood turn ends (one turn's service time), ahead of the flood's queued
// turns. Every flood turn then completes, each conversation's in stream
// order, none given up for waiting (MaxDeliver 2, parked many times).
// Without the budget (PerUser 0, the queue before it) bob's turn waits
// behind the whole flood.
func TestFairTurns(t *testing.T) {
	for _, c := range []struct {
		name     string
		inFlight int
		// ends is how many flood turns end before bob's starts.
		ends int
	}{
		{"a slot free", 4, 0},
		{"slots full", 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := queue.Config{Partitions: 1, AckWait: 2 * time.Second, MaxDeliver: 2, InFlight: c.inFlight, PerUser: 2}
			f := newFlood()
			gaveUp := 0
			var mu sync.Mutex
			e.budgetReplica(t, cfg, f.handle, func() { mu.Lock(); gaveUp++; mu.Unlock() })
			want := map[string][]uint64{}
			for m := range 5 {
				for i := range 8 {
					cid := fmt.Sprintf("ac_flood%d", i)
					want[cid] = append(want[cid], e.sayAs(t, "flood", cid, fmt.Sprintf("am_f%d_%d", i, m), int32(m+1)))
				}
			}
			testkit.Eventually(t, 10*time.Second, func() bool { return f.count("start flood") == 2 }, "the flood's first two turns running")
			want["ac_bob"] = []uint64{e.sayAs(t, "bob", "ac_bob", "am_bob", 1)}
			// bob's turn is with the replica before a slot frees: the queue
			// delivered it, the 41st turn (a replica pulls one turn at a
			// time and takes each before its next pull, so every later
			// delivery comes after bob's). Not NumPending == 0: that holds
			// too while bob's turn is still being sourced into the queue.
			testkit.EventuallyNoError(t, 10*time.Second, func() error {
				info, err := e.js.Consumer(t.Context(), queue.Stream, queue.ConsumerName(0))
				if err != nil {
					return err
				}
				if d := info.CachedInfo().Delivered.Stream; d < 41 {
					return fmt.Errorf("turns delivered up to the %dth of 41", d)
				}
				return nil
			}, "bob's turn delivered")
			for range c.ends {
				f.tokens <- struct{}{}
			}
			testkit.Eventually(t, 10*time.Second, func() bool { return f.count("start bob") == 1 }, "bob's turn started")
			if n := f.count("end flood"); n != c.ends {
				t.Fatalf("bob's turn started after %d flood turns ended, want %d", n, c.ends)
			}
			for range 40 {
				f.tokens <- struct{}{}
			}
			testkit.Eventually(t, 30*time.Second, func() bool { return f.count("end flood") == 40 }, "every flood turn done")
			f.mu.Lock()
			defer f.mu.Unlock()
			for cid, w := range want {
				if !slices.Equal(f.order[cid], w) {
					t.Errorf("%s ran %v, want %v (stream order)", cid, f.order[cid], w)
				}
			}
			if f.most["flood"] > 2 {
				t.Errorf("the flood ran %d turns at once, over its budget of 2", f.most["flood"])
			}
			mu.Lock()
			defer mu.Unlock()
			if gaveUp != 0 {
				t.Errorf("%d turns given up", gaveUp)
			}
		})
	}
}

// TestBudgetSharedByReplicas: two replicas' budgets are one per user: what
// one leases the other cannot exceed; a lease ended on one frees a place for
// the other; leases are renewed past their TTL while their replica lives,
// and lapse TTL after it died, the turn then started again counting its
// second start.
func TestBudgetSharedByReplicas(t *testing.T) {
	e := newEnv(t)
	ttl := 600 * time.Millisecond
	ctxA, dieA := context.WithCancel(t.Context())
	a, err := queue.EnsureBudget(ctxA, natstest.JetStream(t, natstest.Connect(t, e.srv)), 2, ttl, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	b, err := queue.EnsureBudget(t.Context(), natstest.JetStream(t, natstest.Connect(t, e.srv)), 2, ttl, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(bu *queue.Budget, user string, seq uint64) (int, bool) {
		t.Helper()
		starts, ok, err := bu.Acquire(t.Context(), user, seq)
		if err != nil {
			t.Fatal(err)
		}
		return starts, ok
	}
	if _, ok := acquire(a, "alice", 1); !ok {
		t.Fatal("a: first lease refused")
	}
	if _, ok := acquire(b, "alice", 2); !ok {
		t.Fatal("b: second lease refused")
	}
	if _, ok := acquire(a, "alice", 3); ok {
		t.Fatal("a: a third turn of alice leased over a budget of 2 shared with b")
	}
	if _, ok := acquire(b, "bob", 4); !ok {
		t.Fatal("b: bob refused for alice's turns")
	}
	b.Release(t.Context(), "alice", 2)
	if _, ok := acquire(a, "alice", 3); !ok {
		t.Fatal("a: refused after b released a lease")
	}
	// a's leases (1, 3) are renewed past their TTL while it lives…
	deadline := time.Now().Add(3 * ttl)
	testkit.Eventually(t, 5*time.Second, func() bool { return time.Now().After(deadline) }, "three TTLs")
	if _, ok := acquire(b, "alice", 5); ok {
		t.Fatal("b: a live replica's leases lapsed")
	}
	// …and lapse TTL after it died.
	dieA()
	testkit.Eventually(t, 5*time.Second, func() bool {
		n, err := b.Running(t.Context(), "alice")
		return err == nil && n == 0
	}, "the dead replica's leases lapsed")
	starts, ok := acquire(b, "alice", 1)
	if !ok || starts != 2 {
		t.Fatalf("b took over turn 1: ok %v starts %d, want its second start", ok, starts)
	}
	if _, ok := acquire(b, "alice", 3); !ok {
		t.Fatal("b: second place not freed by the dead replica")
	}
}

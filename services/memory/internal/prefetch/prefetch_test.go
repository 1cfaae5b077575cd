package prefetch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory/internal/prefetch"
)

// watch is a prefetch.Watch the test steers.
type watch struct {
	mu      sync.Mutex
	epoch   uint64
	settled bool
}

func (w *watch) Epoch() uint64 { w.mu.Lock(); defer w.mu.Unlock(); return w.epoch }
func (w *watch) Settled() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.settled }

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	c     *prefetch.Cache
	w     *watch
	clock *clock
}

func newFixture(o prefetch.Options) *fixture {
	f := &fixture{w: &watch{settled: true}, clock: &clock{now: time.Unix(1_000_000, 0)}}
	o.Now = f.clock.Now
	f.c = prefetch.New(o, f.w)
	return f
}

func key(user, query string) prefetch.Key {
	return prefetch.Key{UserID: user, Query: query, TopK: 5, Threshold: 0.35}
}

func result(ids ...string) prefetch.Result {
	r := prefetch.Result{Resp: rpc.MemorySearchResponse{Enabled: true, Memories: []rpc.Memory{}}, Vector: []float32{1, 2}}
	for _, id := range ids {
		r.Resp.Memories = append(r.Resp.Memories, rpc.Memory{ID: id})
	}
	return r
}

// prefetched begins and finishes a search for k.
func (f *fixture) prefetched(t *testing.T, k prefetch.Key, r prefetch.Result) {
	t.Helper()
	tk, ok := f.c.Begin(k)
	if !ok {
		t.Fatalf("Begin(%v) found a usable entry", k)
	}
	tk.Done(r)
}

func (f *fixture) lookup(t *testing.T, k prefetch.Key, want prefetch.Outcome) prefetch.Result {
	t.Helper()
	r, got := f.c.Lookup(context.Background(), k)
	if got != want {
		t.Fatalf("Lookup(%v) = %s, want %s", k, got, want)
	}
	return r
}

func TestHitAndKey(t *testing.T) {
	f := newFixture(prefetch.Options{})
	f.prefetched(t, key("alice", "coffee"), result("amem_1"))
	r := f.lookup(t, key("alice", "coffee"), prefetch.Hit)
	if len(r.Resp.Memories) != 1 || r.Resp.Memories[0].ID != "amem_1" {
		t.Fatalf("hit %+v", r.Resp)
	}
	r.Resp.Memories[0].ID = "changed" // the caller's copy
	if again := f.lookup(t, key("alice", "coffee"), prefetch.Hit); again.Resp.Memories[0].ID != "amem_1" {
		t.Fatal("a caller changed the entry")
	}
	// Every field of the key counts; another user never gets the entry.
	for _, k := range []prefetch.Key{key("bob", "coffee"), key("alice", "tea"),
		{UserID: "alice", Query: "coffee", TopK: 6, Threshold: 0.35}, {UserID: "alice", Query: "coffee", TopK: 5, Threshold: 0.5}} {
		f.lookup(t, k, prefetch.Miss)
	}
	// A new message with the same text gets a search of its own.
	tk, ok := f.c.Begin(key("alice", "coffee"))
	if !ok {
		t.Fatal("no new search for a new message")
	}
	tk.Done(result("amem_3"))
	if r := f.lookup(t, key("alice", "coffee"), prefetch.Hit); r.Resp.Memories[0].ID != "amem_3" {
		t.Fatalf("the older search answered: %+v", r.Resp)
	}
}

func TestInFlightIsWaitedFor(t *testing.T) {
	f := newFixture(prefetch.Options{})
	tk, _ := f.c.Begin(key("alice", "coffee"))
	if _, ok := f.c.Begin(key("alice", "coffee")); ok {
		t.Fatal("a second search begun while one is in flight")
	}
	got := make(chan prefetch.Outcome, 1)
	go func() { _, o := f.c.Lookup(context.Background(), key("alice", "coffee")); got <- o }()
	tk.Done(result("amem_1"))
	if o := <-got; o != prefetch.Hit {
		t.Fatalf("waited lookup = %s", o)
	}
	// A request whose context ends stops waiting.
	tk2, _ := f.c.Begin(key("alice", "tea"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, o := f.c.Lookup(ctx, key("alice", "tea")); o != prefetch.Miss {
		t.Fatalf("cancelled lookup = %s", o)
	}
	tk2.Done(prefetch.Result{Err: errors.New("embeddings down")})
	f.lookup(t, key("alice", "tea"), prefetch.Failed)
	// A failed one is searched again.
	if _, ok := f.c.Begin(key("alice", "tea")); !ok {
		t.Fatal("Begin over a failed entry")
	}
}

func TestWriteEndsItsUsersEntries(t *testing.T) {
	f := newFixture(prefetch.Options{})
	f.prefetched(t, key("alice", "coffee"), result("amem_1"))
	f.prefetched(t, key("bob", "coffee"), result("amem_2"))
	f.c.Written("alice", "amact_1")
	r := f.lookup(t, key("alice", "coffee"), prefetch.Stale)
	if len(r.Vector) != 2 || r.Resp.Memories != nil {
		t.Fatalf("stale result %+v: only the embedding may serve", r)
	}
	f.lookup(t, key("bob", "coffee"), prefetch.Hit)
	// A write in flight ends the search that began before it.
	tk, _ := f.c.Begin(key("bob", "tea"))
	f.c.Written("bob", "amact_2")
	tk.Done(result("amem_2"))
	f.lookup(t, key("bob", "tea"), prefetch.Stale)
	// One naming no user ends everyone's.
	f.c.Confirmed("alice", "amact_1")
	f.c.Confirmed("bob", "amact_2")
	f.prefetched(t, key("alice", "coffee"), result("amem_1"))
	f.prefetched(t, key("carol", "coffee"), result())
	f.lookup(t, key("carol", "coffee"), prefetch.Hit)
	f.c.Written("", "")
	f.lookup(t, key("alice", "coffee"), prefetch.Stale)
	f.lookup(t, key("carol", "coffee"), prefetch.Stale)
}

// TestUnappliedWrite: a search that begins while a write of its user is
// heard and not known applied may miss it; its entry is never used, until
// the write is confirmed or Settle has passed.
func TestUnappliedWrite(t *testing.T) {
	f := newFixture(prefetch.Options{Settle: 10 * time.Second})
	f.c.Written("alice", "amact_1")
	f.prefetched(t, key("alice", "coffee"), result())
	f.lookup(t, key("alice", "coffee"), prefetch.Stale)
	f.prefetched(t, key("bob", "coffee"), result())
	f.lookup(t, key("bob", "coffee"), prefetch.Hit)

	f.c.Confirmed("alice", "amact_1")
	f.prefetched(t, key("alice", "coffee"), result("amem_1"))
	f.lookup(t, key("alice", "coffee"), prefetch.Hit)

	// Heard after its confirmation: still ends the entries begun before,
	// not the ones after.
	f.c.Confirmed("alice", "amact_2")
	f.c.Written("alice", "amact_2")
	f.lookup(t, key("alice", "coffee"), prefetch.Stale)
	f.prefetched(t, key("alice", "coffee"), result("amem_1"))
	f.lookup(t, key("alice", "coffee"), prefetch.Hit)

	// Never confirmed (another replica's, or no message id): Settle.
	f.c.Written("alice", "")
	f.prefetched(t, key("alice", "tea"), result())
	f.lookup(t, key("alice", "tea"), prefetch.Stale)
	f.clock.Add(10*time.Second + time.Millisecond)
	f.prefetched(t, key("alice", "tea"), result())
	f.lookup(t, key("alice", "tea"), prefetch.Hit)
}

func TestWatch(t *testing.T) {
	f := newFixture(prefetch.Options{})
	f.prefetched(t, key("alice", "coffee"), result())
	f.w.mu.Lock()
	f.w.settled = false // a write message queued, not handled yet
	f.w.mu.Unlock()
	f.lookup(t, key("alice", "coffee"), prefetch.Stale)
	f.w.mu.Lock()
	f.w.settled, f.w.epoch = true, 1 // reconnected
	f.w.mu.Unlock()
	f.lookup(t, key("alice", "coffee"), prefetch.Stale)
	f.prefetched(t, key("alice", "coffee"), result())
	f.lookup(t, key("alice", "coffee"), prefetch.Hit)
	// Begun while not settled (away, or subscriptions not back yet): a
	// write may go unheard, so never used.
	f.w.mu.Lock()
	f.w.settled = false
	f.w.mu.Unlock()
	f.prefetched(t, key("alice", "tea"), result())
	f.w.mu.Lock()
	f.w.settled = true
	f.w.mu.Unlock()
	f.lookup(t, key("alice", "tea"), prefetch.Stale)
}

func TestTTLAndCap(t *testing.T) {
	f := newFixture(prefetch.Options{TTL: 5 * time.Second, MaxEntries: 3})
	f.prefetched(t, key("alice", "a"), result())
	f.clock.Add(5 * time.Second)
	f.lookup(t, key("alice", "a"), prefetch.Hit)
	f.clock.Add(time.Millisecond)
	f.lookup(t, key("alice", "a"), prefetch.Stale)
	// A message that never became a turn (its publish failed): its entry
	// just expires.
	f.c.Sweep()
	if n := f.c.Len(); n != 0 {
		t.Fatalf("%d entries after the sweep", n)
	}
	f.lookup(t, key("alice", "a"), prefetch.Miss)

	for _, q := range []string{"1", "2", "3", "4", "5"} {
		f.prefetched(t, key("alice", q), result())
		if n := f.c.Len(); n > 3 {
			t.Fatalf("%d entries, cap 3", n)
		}
	}
	f.lookup(t, key("alice", "1"), prefetch.Miss)
	f.lookup(t, key("alice", "2"), prefetch.Miss)
	for _, q := range []string{"3", "4", "5"} {
		f.lookup(t, key("alice", q), prefetch.Hit)
	}
}

// Package prefetch keeps the memory searches the service starts for a user
// message as soon as it is published, so the llm's memory.search for the
// same turn, which comes a few milliseconds later, is answered from them
// (waiting for one still in flight) instead of embedding the text and
// reading Postgres again.
//
// An entry is used only when it is what a search made at the time of the
// request would return. The service's only writer of memories is
// persistence, applying MemoryAction envelopes; the process hears every one
// of them on core NATS when it is published, before persistence can have it
// (Written), and learns when the ones it published itself are applied
// (Confirmed). An entry is used only when all of these hold:
//   - it was asked with the same user, query (trimmed), top-k and threshold;
//   - no memory write of its user (nor one naming no user, which persistence
//     may apply to anyone's memory) was heard since its search began;
//   - when its search began, every write of its user heard before was known
//     applied, or was heard more than Settle ago;
//   - no write can have been missed since it began: the watch was settled
//     then and is now (connected, subscriptions in place, every write
//     message received handled) and its epoch (reconnections, dropped
//     messages) is unchanged;
//   - it is at most TTL old.
//
// Anything else is a miss or a stale entry: the request searches afresh
// (reusing a stale entry's embedding, which depends on the text alone).
package prefetch

import (
	"container/list"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// Key is what a search's result depends on besides the stored memories:
// the request after defaults and caps (the query trimmed).
type Key struct {
	UserID    string
	Query     string
	TopK      int
	Threshold float64
}

// Result is what a prefetched search gave.
type Result struct {
	Resp rpc.MemorySearchResponse
	// Vector is the query's embedding, reusable whatever the memories.
	Vector []float32
	Err    error
}

// Outcome is what Lookup found for a request.
type Outcome string

// Outcomes of Lookup.
const (
	// Hit: a valid prefetched result (finished, or waited for).
	Hit Outcome = "hit"
	// Miss: nothing was prefetched for the key (or it was evicted).
	Miss Outcome = "miss"
	// Stale: an entry was there but may differ from a search now (a memory
	// write, a reconnection, its age); its embedding may still serve.
	Stale Outcome = "stale"
	// Failed: the prefetched search failed; the request searches afresh.
	Failed Outcome = "failed"
)

// Watch says whether the process can have missed a memory write message.
type Watch interface {
	// Epoch changes whenever a write message may have been lost: the
	// connection reconnected, a subscription dropped a message.
	Epoch() uint64
	// Settled reports that no write can be going unheard: the connection
	// is up with its subscriptions in place, and every write message
	// received so far has been handled (passed to Written).
	Settled() bool
}

// Options of a Cache. Zero values take the defaults.
type Options struct {
	// TTL: an entry older than this is never used (default 5 s).
	TTL time.Duration
	// Settle: a write heard this long ago and not confirmed is taken as
	// applied (default 30 s).
	Settle time.Duration
	// MaxEntries caps the entries kept; the oldest go first (default 1024).
	MaxEntries int
	// Now is the clock (tests).
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultTTL        = 5 * time.Second
	DefaultSettle     = 30 * time.Second
	DefaultMaxEntries = 1024
)

// Cache holds prefetched searches. Safe for concurrent use.
type Cache struct {
	ttl, settle time.Duration
	max         int
	now         func() time.Time
	watch       Watch

	mu      sync.Mutex
	entries map[Key]*entry
	order   *list.List // of *entry, oldest first
	// clock counts the writes heard; users and anyone record the clock of
	// their last one.
	clock     uint64
	users     map[string]*writes
	anyone    writes // writes naming no user (they may change anyone's memories)
	confirmed map[string]time.Time
}

// writes is what was heard of one user's memory writes.
type writes struct {
	last   uint64    // clock of the last write heard
	lastAt time.Time // when
	// pending: writes heard and not known applied, by message id, when
	// heard (a message without an id is kept under "").
	pending map[string]time.Time
}

type entry struct {
	key   Key
	start time.Time
	clock uint64 // the write clock when the search began
	epoch uint64
	// clean: when the search began, no write of the user (or naming no
	// user) was waiting to be applied.
	clean bool
	done  chan struct{}
	res   Result
	elem  *list.Element
}

// New returns an empty cache; watch tells whether writes can have been missed.
func New(o Options, watch Watch) *Cache {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cache{ttl: o.TTL, settle: o.Settle, max: o.MaxEntries, now: o.Now, watch: watch,
		entries: map[Key]*entry{}, order: list.New(), users: map[string]*writes{}, confirmed: map[string]time.Time{}}
}

// Ticket is a search begun by Begin; Done gives its result.
type Ticket struct {
	c *Cache
	e *entry
}

// Begin registers a search for key that the caller is about to make, for
// a new message: it replaces a finished entry of the same key (each message
// gets a search begun when it was published). It returns false when a
// search for key is in flight and still valid (nothing to do).
func (c *Cache) Begin(key Key) (*Ticket, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.sweepLocked(now)
	if old := c.entries[key]; old != nil {
		select {
		case <-old.done:
		default:
			if c.validLocked(old, now) {
				return nil, false // in flight, and nothing has changed since it began
			}
		}
		c.removeLocked(old)
	}
	for len(c.entries) >= c.max {
		c.removeLocked(c.order.Front().Value.(*entry))
	}
	e := &entry{key: key, start: now, clock: c.clock, epoch: c.watch.Epoch(), done: make(chan struct{})}
	// Not settled (away, subscriptions not yet back after a reconnection,
	// a write being handled): a write may go unheard; never used.
	e.clean = c.watch.Settled() && !c.pendingLocked(&c.anyone, now)
	if w := c.users[key.UserID]; w != nil && c.pendingLocked(w, now) {
		e.clean = false
	}
	e.elem = c.order.PushBack(e)
	c.entries[key] = e
	return &Ticket{c: c, e: e}, true
}

// Done records the search's result and wakes the requests waiting for it.
// Call it exactly once.
func (t *Ticket) Done(r Result) {
	t.e.res = r
	close(t.e.done)
}

// Lookup returns the prefetched result for key, waiting for a search in
// flight until it ends or ctx does. Only a Hit's Resp may be used as the
// answer; a Stale or Failed result's Vector, when not nil, is the query's
// embedding.
func (c *Cache) Lookup(ctx context.Context, key Key) (Result, Outcome) {
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e == nil {
		return Result{}, Miss
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return Result{}, Miss
	}
	if e.res.Err != nil {
		return Result{}, Failed
	}
	c.mu.Lock()
	valid := c.validLocked(e, c.now())
	c.mu.Unlock()
	if !valid {
		return Result{Vector: e.res.Vector}, Stale
	}
	r := e.res
	r.Resp.Memories = slices.Clone(r.Resp.Memories) // the entry's stay as they are
	return r, Hit
}

// Has reports whether an entry for key is kept (finished or not, valid or
// not).
func (c *Cache) Has(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key] != nil
}

// validLocked reports whether e may still answer (its result aside).
func (c *Cache) validLocked(e *entry, now time.Time) bool {
	if !e.clean || now.Sub(e.start) > c.ttl || c.anyone.last > e.clock {
		return false
	}
	if w := c.users[e.key.UserID]; w != nil && w.last > e.clock {
		return false
	}
	return c.watch.Epoch() == e.epoch && c.watch.Settled()
}

// Written records a memory write heard on the bus: a MemoryAction of
// userID ("" when it names none, or could not be read) with JetStream
// message id msgID ("" when it has none). Entries of that user (of every
// user for "") begun before are no longer used.
func (c *Cache) Written(userID, msgID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.clock++
	w := &c.anyone
	if userID != "" {
		if w = c.users[userID]; w == nil {
			w = &writes{}
			c.users[userID] = w
		}
	}
	w.last, w.lastAt = c.clock, now
	if _, ok := c.confirmed[msgID]; ok && msgID != "" {
		return // heard after its application was confirmed
	}
	if w.pending == nil {
		w.pending = map[string]time.Time{}
	}
	w.pending[msgID] = now
}

// Confirmed records that the write with message id msgID, of userID, is
// applied: searches begun from now on see it.
func (c *Cache) Confirmed(userID, msgID string) {
	if msgID == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.confirmed[msgID] = c.now()
	if w := c.users[userID]; w != nil {
		delete(w.pending, msgID)
	}
	delete(c.anyone.pending, msgID)
}

// pendingLocked reports whether w has a write heard within Settle and not
// confirmed, forgetting older ones.
func (c *Cache) pendingLocked(w *writes, now time.Time) bool {
	for id, at := range w.pending {
		if now.Sub(at) > c.settle {
			delete(w.pending, id)
		}
	}
	return len(w.pending) > 0
}

// Sweep forgets expired entries and what no entry needs any more: call it
// now and then (every TTL).
func (c *Cache) Sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(c.now())
}

func (c *Cache) sweepLocked(now time.Time) {
	for f := c.order.Front(); f != nil; f = c.order.Front() {
		e := f.Value.(*entry)
		if now.Sub(e.start) <= c.ttl {
			break
		}
		c.removeLocked(e)
	}
	// A user's last write matters to entries begun before it; those
	// expire within TTL of it.
	for id, w := range c.users {
		if !c.pendingLocked(w, now) && now.Sub(w.lastAt) > c.ttl {
			delete(c.users, id)
		}
	}
	for id, at := range c.confirmed {
		if now.Sub(at) > c.settle {
			delete(c.confirmed, id)
		}
	}
}

func (c *Cache) removeLocked(e *entry) {
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	c.order.Remove(e.elem)
}

// TTL is how long an entry may serve.
func (c *Cache) TTL() time.Duration { return c.ttl }

// Len is the number of entries kept (tests, metrics).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

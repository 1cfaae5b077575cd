package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
)

// LeaseBucket is the KeyValue bucket of the turns running per user, over
// every replica (stream KV_LLM_TURN_LEASES).
const LeaseBucket = "LLM_TURN_LEASES"

// Budget bounds how many turns of one user run at once over every replica:
// a turn runs under a lease, an entry in the user's key of LeaseBucket
// updated with compare-and-set. A replica renews its leases every TTL/3; the
// leases of a replica that died lapse after TTL and no longer count.
type Budget struct {
	kv      jetstream.KeyValue
	perUser int
	ttl     time.Duration
	replica string
	log     zerolog.Logger

	mu   sync.Mutex
	held map[string][]uint64 // user → the turns (LLM_TURNS sequences) leased here
	// freed is closed (and replaced) when a lease held here ends, so the
	// turns waiting on a budget here try again at once.
	freed chan struct{}
}

// lease is one running turn of a user.
type lease struct {
	Seq     uint64 `json:"seq"`     // the turn's LLM_TURNS sequence
	Replica string `json:"replica"` // who runs it
	Until   int64  `json:"until"`   // unix ms; past it the lease lapsed (its replica died)
	// Starts counts the times the turn was started: a lapsed lease of the
	// same turn is taken over with one more. It stands for the server's
	// delivery count, which waiting turns (parked) raise.
	Starts int `json:"starts"`
}

// lapsedKept: a lapsed lease stays in its user's entry (not counted) this
// many TTLs, so the turn redelivered after its replica died keeps counting
// its starts.
const lapsedKept = 10

// EnsureBudget creates or opens LeaseBucket (memory storage: a lease is
// worth an fsync less per turn; one lost with a server restart is written
// again at the next renewal) and starts renewing this replica's leases until
// ctx ends. perUser < 1 means no budget (nil).
func EnsureBudget(ctx context.Context, js jetstream.JetStream, perUser int, ttl time.Duration, replicas int, log zerolog.Logger) (*Budget, error) {
	if perUser < 1 {
		return nil, nil
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, History: 1,
		Description: "llm turns running per user (leases), over every replica",
		Storage:     jetstream.MemoryStorage, Replicas: max(replicas, 1), MaxValueSize: 64 << 10})
	if err != nil {
		return nil, fmt.Errorf("queue: bucket %s: %w", LeaseBucket, err)
	}
	b := &Budget{kv: kv, perUser: perUser, ttl: ttl, replica: nuid.Next(), log: log,
		held: map[string][]uint64{}, freed: make(chan struct{})}
	go b.renew(ctx)
	return b, nil
}

// PerUser is the budget: turns of one user at once.
func (b *Budget) PerUser() int { return b.perUser }

// errConflict: another replica updated the entry first.
var errConflict = errors.New("lease entry changed")

// Acquire leases a turn of user: ok false when the user runs PerUser turns
// already (over every replica). starts is the turn's start, 1 the first.
func (b *Budget) Acquire(ctx context.Context, user string, seq uint64) (starts int, ok bool, err error) {
	for range 20 {
		ok, err = b.update(ctx, user, func(ls []lease, now int64) ([]lease, bool) {
			live, prev := 0, 0
			for _, l := range ls {
				if l.Seq == seq {
					prev = l.Starts
				} else if l.Until > now {
					live++
				}
			}
			if live >= b.perUser {
				return nil, false
			}
			starts = prev + 1
			ls = slices.DeleteFunc(ls, func(l lease) bool { return l.Seq == seq })
			return append(ls, lease{Seq: seq, Replica: b.replica, Until: now + b.ttl.Milliseconds(), Starts: starts}), true
		})
		if errors.Is(err, errConflict) {
			continue
		}
		if err == nil && ok {
			b.mu.Lock()
			b.held[user] = append(b.held[user], seq)
			b.mu.Unlock()
		}
		return starts, ok, err
	}
	return 0, false, fmt.Errorf("queue: lease of %s: %w 20 times", user, errConflict)
}

// Release ends the lease of a turn (done, given up or given back).
func (b *Budget) Release(ctx context.Context, user string, seq uint64) {
	b.mu.Lock()
	b.held[user] = slices.DeleteFunc(b.held[user], func(s uint64) bool { return s == seq })
	if len(b.held[user]) == 0 {
		delete(b.held, user)
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}()
	for range 20 {
		_, err := b.update(ctx, user, func(ls []lease, _ int64) ([]lease, bool) {
			return slices.DeleteFunc(ls, func(l lease) bool { return l.Seq == seq }), true
		})
		if !errors.Is(err, errConflict) {
			if err != nil {
				b.log.Warn().Err(err).Msg("turn lease not released: it lapses after the lease's TTL")
			}
			return
		}
	}
}

// Freed is closed when a lease held here ends.
func (b *Budget) Freed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freed
}

// Running is how many turns of user hold a live lease (over every replica).
func (b *Budget) Running(ctx context.Context, user string) (int, error) {
	e, err := b.kv.Get(ctx, leaseKey(user))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var ls []lease
	if err := json.Unmarshal(e.Value(), &ls); err != nil {
		return 0, err
	}
	now, n := time.Now().UnixMilli(), 0
	for _, l := range ls {
		if l.Until > now {
			n++
		}
	}
	return n, nil
}

// update reads the user's entry, lets change rewrite its leases (without
// the ones lapsed long ago) and writes them back if the entry did not change
// meanwhile (errConflict otherwise). change returning false writes nothing.
func (b *Budget) update(ctx context.Context, user string, change func([]lease, int64) ([]lease, bool)) (bool, error) {
	key := leaseKey(user)
	var ls []lease
	var rev uint64
	e, err := b.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return false, err
	default:
		rev = e.Revision()
		if err := json.Unmarshal(e.Value(), &ls); err != nil {
			ls = nil // unreadable: start it again
		}
	}
	now := time.Now().UnixMilli()
	ls = slices.DeleteFunc(ls, func(l lease) bool { return l.Until+lapsedKept*b.ttl.Milliseconds() < now })
	ls, ok := change(ls, now)
	if !ok {
		return false, nil
	}
	val, err := json.Marshal(ls)
	if err != nil {
		return false, err
	}
	if err := bus.WriteRevision(ctx, b.kv, key, val, rev); errors.Is(err, bus.ErrKVConflict) {
		return false, errConflict
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// renew extends this replica's leases every TTL/3 (and writes back one lost
// with a server restart).
func (b *Budget) renew(ctx context.Context) {
	t := time.NewTicker(max(b.ttl/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		held := make(map[string][]uint64, len(b.held))
		for u, s := range b.held {
			held[u] = slices.Clone(s)
		}
		b.mu.Unlock()
		for user, seqs := range held {
			for range 20 {
				_, err := b.update(ctx, user, func(ls []lease, now int64) ([]lease, bool) {
					for _, s := range seqs {
						if !b.holds(user, s) {
							continue // released meanwhile
						}
						i := slices.IndexFunc(ls, func(l lease) bool { return l.Seq == s })
						if i < 0 {
							ls = append(ls, lease{Seq: s, Replica: b.replica, Starts: 1})
							i = len(ls) - 1
						}
						ls[i].Until, ls[i].Replica = now+b.ttl.Milliseconds(), b.replica
					}
					return ls, true
				})
				if !errors.Is(err, errConflict) {
					if err != nil && ctx.Err() == nil {
						b.log.Warn().Err(err).Msg("turn leases not renewed")
					}
					break
				}
			}
		}
	}
}

func (b *Budget) holds(user string, seq uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.held[user], seq)
}

// leaseKey is a user's key: a digest, since a user id may hold characters
// a key cannot.
func leaseKey(user string) string {
	h := sha256.Sum256([]byte(user))
	return "u." + hex.EncodeToString(h[:16])
}

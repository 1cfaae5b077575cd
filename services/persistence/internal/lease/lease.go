// Package lease spreads the partitions of the streams persistence applies
// over the persistence instances alive. Each instance heartbeats, renews the
// leases it holds, gives back what is beyond its fair share (the partitions
// divided by the instances alive, rounded up) and takes what no one holds
// (never leased, released, or expired with an instance that died) up to its
// share. The database fences every lease (services/persistence/internal/
// store, Apply): the assignment only decides who works, never whether a
// write is safe.
package lease

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/persistence/internal/store"
)

// Store is what the coordinator keeps its leases in (*store.Store).
type Store interface {
	Heartbeat(ctx context.Context, id, consumer string, partitions int, ttl time.Duration) (live int, blocked bool, err error)
	Renew(ctx context.Context, id string, held []store.Lease, ttl time.Duration) ([]store.Lease, error)
	Take(ctx context.Context, id string, candidates []store.Unit, n int, ttl time.Duration) ([]store.Lease, error)
	Release(ctx context.Context, id string, held []store.Lease) error
	Leave(ctx context.Context, id string) error
}

// Coordinator holds one instance's leases.
type Coordinator struct {
	ID       string       // this instance
	Consumer string       // the partitions' consumer name (instances of one deployment share it)
	Units    []store.Unit // every partition of every stream
	// Partitions is how many conversation partitions this instance was
	// configured with; an instance started later than one alive with
	// another count holds nothing until that one is gone.
	Partitions int
	TTL        time.Duration
	Store      Store
	Log        zerolog.Logger
	// OnTick, when set, is called after each tick with the instances alive
	// and the partitions held (metrics).
	OnTick func(live, held int)

	mu      sync.Mutex
	held    map[store.Unit]store.Lease
	changed chan struct{}
	ticked  time.Time // the last tick that reached the database
	waiting bool      // blocked by instances configured otherwise
}

// Every is how often the coordinator ticks: five times per lease.
func (c *Coordinator) Every() time.Duration { return c.TTL / 5 }

// Held returns the leases held on stream, sorted by name, and a channel
// closed when what is held (on any stream) changes.
func (c *Coordinator) Held(stream string) ([]store.Lease, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	var out []store.Lease
	for u, l := range c.held {
		if u.Stream == stream {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return cmp.Compare(a.Name, b.Name) })
	return out, c.changed
}

// Healthy reports whether the last tick that reached the database is
// younger than a lease: until then what it holds is still its own.
func (c *Coordinator) Healthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.ticked) < c.TTL
}

func (c *Coordinator) init() {
	if c.changed == nil {
		c.changed = make(chan struct{})
		c.held = map[store.Unit]store.Lease{}
	}
}

// Run ticks until ctx ends. A tick that fails is logged and tried again on
// the next one; what the instance held stays held meanwhile (the fences
// keep a lease taken over meanwhile from being written under).
func (c *Coordinator) Run(ctx context.Context) error {
	t := time.NewTicker(c.Every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := c.Tick(ctx); err != nil && ctx.Err() == nil {
			c.Log.Warn().Err(err).Msg("lease tick failed; keeping the partitions held until the next")
		}
	}
}

// Tick heartbeats, renews, gives back what is beyond the fair share and
// takes what is free up to it.
func (c *Coordinator) Tick(ctx context.Context) error {
	c.mu.Lock()
	c.init()
	held := make([]store.Lease, 0, len(c.held))
	for _, l := range c.held {
		held = append(held, l)
	}
	c.mu.Unlock()

	live, blocked, err := c.Store.Heartbeat(ctx, c.ID, c.Consumer, c.Partitions, c.TTL)
	if err != nil {
		return err
	}
	if blocked {
		// An instance with another partition count applies the streams:
		// conversations would be split two ways at once. Wait for it to go
		// (a rolling update stops it once this one is up).
		if !c.waiting {
			c.Log.Warn().Int("partitions", c.Partitions).Msg("instances with another ALICIA_PERSISTENCE_SHARDS are running; taking no partition until they have stopped")
		}
		c.waiting = true
		c.set(map[store.Unit]store.Lease{})
		if err := c.Store.Release(ctx, c.ID, held); err != nil {
			return err
		}
		c.mu.Lock()
		c.ticked = time.Now()
		c.mu.Unlock()
		if c.OnTick != nil {
			c.OnTick(live, 0)
		}
		return nil
	}
	c.waiting = false
	kept, err := c.Store.Renew(ctx, c.ID, held, c.TTL)
	if err != nil {
		return err
	}
	if len(kept) < len(held) {
		c.Log.Warn().Int("held", len(held)).Int("kept", len(kept)).Msg("partitions taken over by another instance")
	}
	share := (len(c.Units) + max(live, 1) - 1) / max(live, 1)
	now := map[store.Unit]store.Lease{}
	for _, l := range kept {
		now[store.Unit{Stream: l.Stream, Name: l.Name}] = l
	}
	switch {
	case len(kept) > share:
		// Beyond the share: the last partitions go back (the loops stop
		// applying them first, so the release rarely meets a batch).
		slices.SortFunc(kept, func(a, b store.Lease) int {
			if a.Stream != b.Stream {
				return cmp.Compare(a.Stream, b.Stream)
			}
			return cmp.Compare(a.Name, b.Name)
		})
		extra := kept[share:]
		for _, l := range extra {
			delete(now, store.Unit{Stream: l.Stream, Name: l.Name})
		}
		c.set(now)
		if err := c.Store.Release(ctx, c.ID, extra); err != nil {
			return err
		}
		c.Log.Info().Int("released", len(extra)).Int("held", len(now)).Int("instances", live).Msg("partitions handed to other instances")
	case len(kept) < share:
		var free []store.Unit
		for _, u := range c.Units {
			if _, ok := now[u]; !ok {
				free = append(free, u)
			}
		}
		took, err := c.Store.Take(ctx, c.ID, free, share-len(kept), c.TTL)
		if err != nil {
			c.set(now)
			return err
		}
		for _, l := range took {
			now[store.Unit{Stream: l.Stream, Name: l.Name}] = l
		}
		if len(took) > 0 {
			c.Log.Info().Int("took", len(took)).Int("held", len(now)).Int("instances", live).Msg("partitions taken")
		}
		c.set(now)
	default:
		c.set(now)
	}
	c.mu.Lock()
	c.ticked = time.Now()
	c.mu.Unlock()
	if c.OnTick != nil {
		c.OnTick(live, len(now))
	}
	return nil
}

// set replaces what is held and wakes the watchers when it changed.
func (c *Coordinator) set(now map[store.Unit]store.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	same := len(now) == len(c.held)
	for u, l := range now {
		if old, ok := c.held[u]; !ok || old.Fence != l.Fence {
			same = false
		}
	}
	// Offsets move with every renewal; only the leases themselves count.
	c.held = now
	if !same {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// Leave gives everything back and forgets the instance, so the others take
// its partitions at once instead of after the lease.
func (c *Coordinator) Leave(ctx context.Context) error {
	c.set(map[store.Unit]store.Lease{})
	return c.Store.Leave(ctx, c.ID)
}

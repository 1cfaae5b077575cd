package queue

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Turn is one turn envelope taken from the queue.
type Turn struct {
	Env            protocol.Envelope
	ConversationID string
	Partition      int
	// Sequence is the envelope's CONVERSATIONS stream sequence: everything
	// before it in the conversation happened before the turn.
	Sequence  uint64
	Delivered uint64 // 1 on the first delivery, more after a replica died, gave the turn back or parked it
	Queued    time.Time
	// User is the envelope's meta alicia.user_id (set by the edges): the
	// budget of turns at once is counted per user.
	User string
}

// Handler runs one turn. nil acks it. An error wrapped with bus.Permanent (or
// any error on the last allowed attempt) terminates it; another error runs
// it again after a delay (Backoff), on this replica, before any later turn
// of its conversation. When ctx ends (shutdown) the turn is given back at
// once, so another replica takes it over.
type Handler func(ctx context.Context, t Turn) error

// Consumer pulls turns from every partition and runs them.
type Consumer struct {
	Queue   *Queue
	Handler Handler
	// GiveUp, when set, is called for a turn that is terminated (undecodable,
	// permanent error, attempts exhausted), so the client can be told.
	GiveUp     func(ctx context.Context, t Turn, err error)
	AckWait    time.Duration // heartbeats are sent every AckWait/3
	MaxDeliver int           // attempts of one turn, deliveries included
	Backoff    func(delivered uint64) time.Duration
	// Grace is how long running turns may finish after ctx ends before they
	// are cancelled and given back.
	Grace time.Duration
	// Forced, when closed, ends the grace at once: the process's stop was
	// forced (svcmain.Forced), running turns are given back now.
	Forced <-chan struct{}
	// FetchWait is how long one pull request waits (default 1 s); it must
	// be shorter than the queue's PinnedTTL, since each pull keeps the
	// partition with this replica.
	FetchWait time.Duration
	// Budget, when set, bounds the turns of one user running at once over
	// every replica; a turn over it waits here (heartbeated), up to
	// Budget.PerUser of a user per partition, and the user's further turns
	// are parked (see the package doc). The queue must have been made with
	// Config.PerUser set.
	Budget *Budget
	Hooks  Hooks
	Log    zerolog.Logger
}

// Hooks report what the budget does (metrics); any may be nil.
type Hooks struct {
	// Parked: a turn was given back to wait outside the partition's
	// window, its user holding Budget.PerUser turns in the partition.
	Parked func()
	// Waiting: turns waiting for their user's budget now (+1, -1).
	Waiting func(delta int)
	// Waited: a turn that waited for its user's budget started after d.
	Waited func(d time.Duration)
}

// Run consumes until ctx ends, then lets running turns finish within Grace
// (or until Forced).
func (c *Consumer) Run(ctx context.Context) error {
	turnCtx, cancelTurns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTurns()
	if c.Forced != nil {
		go func() {
			select {
			case <-c.Forced:
				cancelTurns()
			case <-turnCtx.Done():
			}
		}()
	}
	stop := context.AfterFunc(ctx, func() {
		if c.Grace <= 0 {
			cancelTurns()
			return
		}
		t := time.AfterFunc(c.Grace, cancelTurns)
		context.AfterFunc(turnCtx, func() { t.Stop() })
	})
	defer stop()
	var wg sync.WaitGroup
	h := &holdings{pins: map[int]string{}}
	for k := range c.Queue.Partitions() {
		wg.Go(func() { c.partition(ctx, turnCtx, k, h) })
	}
	wg.Wait()
	return nil
}

// partition pulls partition k's turns while this replica holds it (the
// server delivers them to the pinned replica only; the others' pulls wait)
// and runs them by conversation. A replica holding more than its share of
// the partitions gives some up; when ctx ends it gives every one up
// (release).
func (c *Consumer) partition(ctx, turnCtx context.Context, k int, h *holdings) {
	cons := c.Queue.Consumer(k)
	log := c.Log.With().Int("partition", k).Logger()
	for {
		run := &partitionRun{c: c, ctx: ctx, turnCtx: turnCtx, k: k, log: log, convs: map[string]*convTurns{},
			parked: map[string][]uint64{}, heldBy: map[string]int{}, runningBy: map[string]int{}}
		pin := c.pull(ctx, k, &cons, run, h, log)
		if pin == "" {
			pin = h.pin(k)
		}
		c.release(turnCtx, k, cons, run, pin, log)
		h.set(k, "")
		if ctx.Err() != nil {
			return
		}
		c.standBy(ctx, k, cons)
	}
}

func (c *Consumer) fetchWait() time.Duration {
	if c.FetchWait > 0 {
		return c.FetchWait
	}
	return time.Second
}

package queue

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
)

// pull takes partition k's turns until ctx ends or this replica holds more
// than its share of the partitions; then it returns the pin it gave up.
func (c *Consumer) pull(ctx context.Context, k int, cons *jetstream.Consumer, run *partitionRun, h *holdings, log zerolog.Logger) string {
	wait := c.fetchWait()
	failures := 0
	var checked time.Time
	for ctx.Err() == nil {
		// A stop does not cut the pull short (bus.NextOpts): a turn
		// delivered meanwhile is taken and given back by release.
		m, err := (*cons).Next(append(bus.NextOpts(wait), jetstream.FetchPriorityGroup(PriorityGroup))...)
		switch {
		case err == nil:
			failures = 0
			if pin := m.Headers().Get(pinHeader); pin != "" && h.set(k, pin) {
				// Just pinned: turns another replica took and did not
				// finish (it died) come back after AckWait; until then
				// none starts, so a conversation's turns keep their order.
				run.awaitOrphans(*cons)
			}
			run.add(m)
		case ctx.Err() != nil:
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || isTimeout(err):
			// An idle partition, or one another replica holds: the pull
			// ended without a turn.
			failures = 0
		case errors.Is(err, jetstream.ErrPinIDMismatch):
			// This replica held the partition and lost it (it did not pull
			// for PinnedTTL): nats.go forgot the pin; pull again.
			failures = 0
			h.set(k, "")
			log.Warn().Msg("turn partition taken over by another replica")
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, nats.ErrNoResponders):
			// The server restarted (the consumer lived in memory): recreate it.
			if cn, cerr := c.Queue.ensureConsumer(ctx, k); cerr == nil {
				*cons = cn
				log.Info().Msg("turn consumer recreated")
				continue
			}
			fallthrough
		default:
			failures++
			d := min(time.Duration(failures)*200*time.Millisecond, 5*time.Second)
			log.Warn().Err(err).Dur("retry_in", d).Msg("pull failed")
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if time.Since(checked) >= balanceEvery && h.holds(k) {
			checked = time.Now()
			if pin := c.overShare(ctx, k, *cons, h); pin != "" {
				log.Debug().Msg("turn partition given up: more than this replica's share")
				return pin
			}
		}
	}
	return ""
}

// release gives partition k up: no turn starts any more; the running ones
// finish (within the grace: turnCtx) while the partition keeps being pulled,
// so it stays with this replica and the turns that come meanwhile wait here;
// then the waiting turns are given back in order and the partition is
// unpinned, so the next replica that pulls takes it, and them, at once.
func (c *Consumer) release(turnCtx context.Context, k int, cons jetstream.Consumer, run *partitionRun, pin string, log zerolog.Logger) {
	run.hold()
	for run.running() {
		m, err := cons.Next(append(bus.NextOpts(min(c.fetchWait(), 500*time.Millisecond)), jetstream.FetchPriorityGroup(PriorityGroup))...)
		switch {
		case err == nil:
			run.add(m)
		case turnCtx.Err() != nil:
			run.wait() // the running turns give themselves back
		}
	}
	run.giveBack()
	if pin == "" {
		return // not held here
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(turnCtx), 2*time.Second)
	defer cancel()
	// Only this replica's pin: another replica's (it took the partition
	// over meanwhile) stays.
	if info, err := cons.Info(uctx); err != nil || pinnedTo(info) != pin {
		return
	}
	if err := c.Queue.unpin(uctx, k); err != nil {
		log.Debug().Err(err).Msg("turn partition not unpinned (another replica takes it after the pin's TTL)")
	}
}

// standBy waits, after giving partition k up, until another replica holds
// it (or standByFor has passed), then k is pulled again: the others take
// it first.
func (c *Consumer) standBy(ctx context.Context, k int, cons jetstream.Consumer) {
	deadline := time.Now().Add(standByFor)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := cons.Info(ictx)
		cancel()
		if err == nil && pinnedTo(info) != "" {
			return
		}
	}
}

// pinHeader carries the pin id on a message delivered to the pinned client.
const pinHeader = "Nats-Pin-Id"

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

package queue

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Balancing: a replica looks every balanceEvery whether it holds more than
// its share of the partitions: ceil(P / replicas) + 1, the replicas being
// the pull requests waiting on the partition's consumer and its own. A
// partition over the share is given up (release: its running turns finish
// first); the replica then stands by (does not pull it) until another one
// holds it, at most standByFor.
const (
	balanceEvery = 2 * time.Second
	standByFor   = 10 * time.Second
)

// holdings are the partitions this replica holds, with their pin ids.
type holdings struct {
	mu   sync.Mutex
	pins map[int]string
}

// set records that partition k is held under pin ("": not held) and reports
// whether it was not held before.
func (h *holdings) set(k int, pin string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.pins[k]
	if pin == "" {
		delete(h.pins, k)
	} else {
		h.pins[k] = pin
	}
	return was == "" && pin != ""
}

func (h *holdings) holds(k int) bool { return h.pin(k) != "" }

// pin is the pin id this replica holds partition k under ("": not held).
func (h *holdings) pin(k int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pins[k]
}

// overShare reports whether this replica holds more than its share of the
// partitions and, if so, counts k as given up and returns its pin.
func (c *Consumer) overShare(ctx context.Context, k int, cons jetstream.Consumer, h *holdings) string {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	info, err := cons.Info(ictx)
	cancel()
	if err != nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	pin := h.pins[k]
	if pin == "" || pinnedTo(info) != pin {
		delete(h.pins, k) // another replica holds it now
		return ""
	}
	replicas := info.NumWaiting + 1
	share := (c.Queue.Partitions()+replicas-1)/replicas + 1
	if len(h.pins) <= share {
		return ""
	}
	delete(h.pins, k)
	return pin
}

// pinnedTo is the pin id of the replica holding the consumer's partition.
func pinnedTo(info *jetstream.ConsumerInfo) string {
	for _, g := range info.PriorityGroups {
		if g.Group == PriorityGroup {
			return g.PinnedClientID
		}
	}
	return ""
}

// awaitOrphans holds the turns while the consumer has turns pending that
// this replica did not take (another replica's, which died, or parked by
// another replica), until they come back here or AckWait has passed,
// whichever is first.
func (p *partitionRun) awaitOrphans(cons jetstream.Consumer) {
	ictx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	info, err := cons.Info(ictx)
	cancel()
	if err != nil || info.NumAckPending <= p.taken()+1 { // this run's turns and the one just delivered
		return
	}
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
	p.log.Info().Int("pending_elsewhere", info.NumAckPending-1-p.taken()).Msg("turn partition taken over with turns of a lost replica pending: waiting for them")
	go func() {
		deadline := time.Now().Add(p.c.AckWait + time.Second)
		for time.Now().Before(deadline) && p.ctx.Err() == nil {
			select {
			case <-p.ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
			ictx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
			info, err := cons.Info(ictx)
			cancel()
			if err == nil && info.NumAckPending <= p.taken() {
				break
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ctx.Err() != nil {
			return // released: release gives them back
		}
		p.held = false
		p.scheduleLocked()
	}()
}

package queue

import (
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
)

// budgetRetry is how often a turn waiting on its user's budget tries again
// when no lease ended on this replica (another replica's may have).
const budgetRetry = 250 * time.Millisecond

// budgeted reports whether the turn counts against a user's budget.
func (p *partitionRun) budgeted(t Turn) bool { return p.c.Budget != nil && t.User != "" }

// parkedBelow reports whether a turn of the conversation before seq is
// parked: seq must then wait too.
func (p *partitionRun) parkedBelow(cid string, seq uint64) bool {
	return slices.ContainsFunc(p.parked[cid], func(s uint64) bool { return s < seq })
}

// park gives a turn back to come again after a delay (NakWithDelay): it
// leaves this replica (no heartbeat, nothing held) and the partition's
// window is unbounded, so it holds no place another user's turn needs. The
// consumer has no MaxDeliver (the budget counts a turn's starts instead):
// a parked turn is never given up for waiting.
func (p *partitionRun) park(m jetstream.Msg, t Turn, seq uint64) {
	p.c.settler(p.log).Settle(p.turnCtx, m, bus.RetryIn(p.c.parkDelay(t.Delivered), nil))
	p.parked[t.ConversationID] = append(p.parked[t.ConversationID], seq)
	if p.c.Hooks.Parked != nil {
		p.c.Hooks.Parked()
	}
}

// parkDelay grows with the deliveries of a turn (250 ms, doubling) up to
// 8 s or AckWait/2, whichever is less: a parked turn comes back before a
// replica taking the partition over stops waiting for its orphans.
func (c *Consumer) parkDelay(delivered uint64) time.Duration {
	d := 250 * time.Millisecond << min(max(delivered, 1)-1, 5)
	return min(d, 8*time.Second, max(c.AckWait/2, 50*time.Millisecond))
}

// retryBudgetLocked tries the turns waiting on a budget again whenever a
// lease ends on this replica, and every budgetRetry (for other replicas'),
// while any waits.
func (p *partitionRun) retryBudgetLocked() {
	if p.retrying {
		return
	}
	p.retrying = true
	go func() {
		for {
			select {
			case <-p.c.Budget.Freed():
			case <-time.After(budgetRetry):
			case <-p.ctx.Done():
			}
			p.mu.Lock()
			waiting := false
			for _, ct := range p.convs {
				if ct.overBudget {
					ct.overBudget, waiting = false, true
				}
			}
			if !waiting || p.ctx.Err() != nil {
				p.retrying = false
				p.mu.Unlock()
				return
			}
			p.scheduleLocked()
			p.mu.Unlock()
		}
	}()
}

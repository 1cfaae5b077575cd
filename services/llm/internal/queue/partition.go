package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
)

// partitionRun runs the turns of one partition that this replica took:
// those of different conversations at once (up to the partition's
// InFlight), those of one conversation one after the other in stream order.
// When a run slot frees, the conversation whose user runs the fewest turns
// of the partition goes first (then the earliest taken).
type partitionRun struct {
	c            *Consumer
	ctx, turnCtx context.Context
	k            int
	log          zerolog.Logger
	wg           sync.WaitGroup

	mu    sync.Mutex
	convs map[string]*convTurns
	// held: no turn starts (release, or orphans awaited).
	held bool
	// active counts the conversations running a turn.
	active int
	// parked are the turns this run gave back to wait (LLM_TURNS
	// sequences by conversation) until they come back.
	parked map[string][]uint64
	// heldBy counts the turns taken per user (running or waiting);
	// runningBy the running ones.
	heldBy, runningBy map[string]int
	// taken numbers the turns in the order they were taken.
	order uint64
	// retrying: a goroutine retries the turns waiting on a budget.
	retrying bool
}

// convTurns are a conversation's turns taken and not yet done; the first
// one runs when running is set.
type convTurns struct {
	turns   []takenTurn
	running bool
	// overBudget: the first turn found its user over budget; it is tried
	// again when a lease ends here or after budgetRetry. waitingSince is
	// when it first did.
	overBudget   bool
	waitingSince time.Time
}

type takenTurn struct {
	m jetstream.Msg
	t Turn
	// seq is the turn's LLM_TURNS sequence: a redelivery has the same.
	seq uint64
	// order is when the turn was taken (partitionRun.order).
	order uint64
	// beat stops the heartbeat that keeps the turn with this replica from
	// the moment it is taken (a turn waiting behind its conversation's
	// running one is not redelivered).
	beat context.CancelFunc
}

// take starts the heartbeat of a delivered turn.
func (p *partitionRun) take(m jetstream.Msg, t Turn, seq uint64) takenTurn {
	ctx, cancel := context.WithCancel(p.turnCtx)
	go bus.Heartbeat(ctx, m, p.c.AckWait)
	p.order++
	return takenTurn{m: m, t: t, seq: seq, order: p.order, beat: cancel}
}

// add takes a delivered turn: it runs at once unless a turn of its
// conversation runs, else after the ones before it. Over the budget's
// holding (the user holds PerUser turns of the partition here) or behind a
// parked turn of its conversation, it is parked.
func (p *partitionRun) add(m jetstream.Msg) {
	md, _ := m.Metadata()
	t := Turn{Partition: p.k, Delivered: 1}
	var seq uint64
	if md != nil {
		t.Delivered, t.Queued, seq = md.NumDelivered, md.Timestamp, md.Sequence.Stream
	}
	if err := p.c.decode(m, &t); err != nil {
		if p.c.GiveUp != nil && t.ConversationID != "" {
			p.c.GiveUp(p.turnCtx, t, err)
		}
		p.c.settler(p.log).Settle(p.turnCtx, m, bus.Fail(fmt.Errorf("undecodable turn: %w", err)))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cid := t.ConversationID
	if ps := p.parked[cid]; seq != 0 && slices.Contains(ps, seq) {
		p.parked[cid] = slices.DeleteFunc(ps, func(s uint64) bool { return s == seq })
		if len(p.parked[cid]) == 0 {
			delete(p.parked, cid)
		}
	}
	ct := p.convs[cid]
	if ct == nil {
		ct = &convTurns{}
		p.convs[cid] = ct
	}
	// A redelivery of a turn held here (its heartbeats came late): a
	// waiting one answers to the newer delivery; a running one keeps its
	// own.
	if i := slices.IndexFunc(ct.turns, func(x takenTurn) bool { return seq != 0 && x.seq == seq }); i >= 0 {
		if i > 0 || !ct.running {
			ct.turns[i].beat()
			ct.turns[i] = p.take(m, t, seq)
		}
		return
	}
	if p.budgeted(t) && (p.heldBy[t.User] >= p.c.Budget.PerUser() || p.parkedBelow(cid, seq)) {
		p.park(m, t, seq)
		if len(ct.turns) == 0 {
			delete(p.convs, cid)
		}
		return
	}
	// After the waiting turns of a lower sequence (a redelivery comes back
	// before the turns that followed it), never before the running one.
	first := 0
	if ct.running {
		first = 1
	}
	i := len(ct.turns)
	for i > first && ct.turns[i-1].t.Sequence > t.Sequence {
		i--
	}
	ct.turns = slices.Insert(ct.turns, i, p.take(m, t, seq))
	p.heldBy[t.User]++
	p.scheduleLocked()
}

// scheduleLocked starts the conversations' next turns while run slots are
// free: the conversations whose user runs the fewest turns here first, then
// the earliest taken.
func (p *partitionRun) scheduleLocked() {
	if p.held || p.ctx.Err() != nil {
		return
	}
	inFlight := p.c.Queue.inFlight()
	if p.active >= inFlight {
		return
	}
	type cand struct {
		cid string
		ct  *convTurns
	}
	var cands []cand
	for cid, ct := range p.convs {
		if !ct.running && !ct.overBudget && len(ct.turns) > 0 && !p.parkedBelow(cid, ct.turns[0].seq) {
			cands = append(cands, cand{cid, ct})
		}
	}
	for p.active < inFlight && len(cands) > 0 {
		best := 0
		for i, x := range cands[1:] {
			ub, ux := p.runningBy[cands[best].ct.turns[0].t.User], p.runningBy[x.ct.turns[0].t.User]
			if ux < ub || (ux == ub && x.ct.turns[0].order < cands[best].ct.turns[0].order) {
				best = i + 1
			}
		}
		x := cands[best]
		cands = slices.Delete(cands, best, best+1)
		x.ct.running = true
		p.active++
		p.runningBy[x.ct.turns[0].t.User]++
		p.wg.Go(func() { p.runNext(x.cid, x.ct) })
	}
}

// runNext runs the conversation's first turn under its user's lease; over
// the budget it waits (overBudget) and frees the run slot.
func (p *partitionRun) runNext(cid string, ct *convTurns) {
	p.mu.Lock()
	next := ct.turns[0]
	p.mu.Unlock()
	user := next.t.User
	attempt := next.t.Delivered
	if p.budgeted(next.t) {
		starts, ok, err := p.c.Budget.Acquire(p.ctx, user, next.seq)
		if err != nil || !ok {
			if err != nil && p.ctx.Err() == nil {
				p.log.Warn().Err(err).Msg("turn lease not taken; trying again")
			}
			p.mu.Lock()
			ct.running, ct.overBudget = false, true
			p.active--
			p.runningBy[user]--
			if ct.waitingSince.IsZero() {
				ct.waitingSince = time.Now()
				if p.c.Hooks.Waiting != nil {
					p.c.Hooks.Waiting(1)
				}
			}
			p.retryBudgetLocked()
			p.scheduleLocked()
			p.mu.Unlock()
			return
		}
		attempt = uint64(starts)
		p.mu.Lock()
		if !ct.waitingSince.IsZero() {
			if p.c.Hooks.Waiting != nil {
				p.c.Hooks.Waiting(-1)
			}
			if p.c.Hooks.Waited != nil {
				p.c.Hooks.Waited(time.Since(ct.waitingSince))
			}
			ct.waitingSince = time.Time{}
		}
		p.mu.Unlock()
	}
	givenBack := p.c.handle(p.ctx, p.turnCtx, next.m, next.t, attempt, p.log)
	if p.budgeted(next.t) {
		p.c.Budget.Release(context.WithoutCancel(p.turnCtx), user, next.seq)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ct.running = false
	p.active--
	p.runningBy[user]--
	if givenBack {
		// Stopping: it stays first of its conversation, heartbeated, and
		// giveBack hands it over with the others.
		return
	}
	next.beat()
	ct.turns = ct.turns[1:]
	p.heldBy[user]--
	if len(ct.turns) == 0 {
		delete(p.convs, cid)
	}
	p.scheduleLocked()
}

// taken is how many turns this run holds or parked.
func (p *partitionRun) taken() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ct := range p.convs {
		n += len(ct.turns)
	}
	for _, ps := range p.parked {
		n += len(ps)
	}
	return n
}

// hold stops turns from starting; the running ones go on.
func (p *partitionRun) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// running reports whether a turn runs.
func (p *partitionRun) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active > 0
}

// wait waits for the running turns to end.
func (p *partitionRun) wait() { p.wg.Wait() }

// giveBack gives the waiting turns back (nak), in order, once none runs:
// those taken and not started, and those a stop interrupted (handle).
// Parked turns are with the server already. It is called when no pull of
// the partition is pending, so the server hands them to another replica.
func (p *partitionRun) giveBack() {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for cid, ct := range p.convs {
		if !ct.waitingSince.IsZero() && p.c.Hooks.Waiting != nil {
			p.c.Hooks.Waiting(-1)
		}
		s := p.c.settler(p.log)
		for _, x := range ct.turns {
			s.Settle(p.turnCtx, x.m, bus.GiveBack())
			x.beat()
		}
		delete(p.convs, cid)
	}
}

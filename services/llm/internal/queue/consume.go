package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
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

// Handler runs one turn. nil acks it. An error wrapped with Permanent (or
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

// pull takes partition k's turns until ctx ends or this replica holds more
// than its share of the partitions; then it returns the pin it gave up.
func (c *Consumer) pull(ctx context.Context, k int, cons *jetstream.Consumer, run *partitionRun, h *holdings, log zerolog.Logger) string {
	wait := c.fetchWait()
	failures := 0
	var checked time.Time
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, wait)
		m, err := (*cons).Next(append(bus.NextOpts(fctx), jetstream.FetchPriorityGroup(PriorityGroup))...)
		cancel()
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
		fctx, cancel := context.WithTimeout(turnCtx, min(c.fetchWait(), 500*time.Millisecond))
		m, err := cons.Next(append(bus.NextOpts(fctx), jetstream.FetchPriorityGroup(PriorityGroup))...)
		cancel()
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

func (c *Consumer) fetchWait() time.Duration {
	if c.FetchWait > 0 {
		return c.FetchWait
	}
	return time.Second
}

// pinHeader carries the pin id on a message delivered to the pinned client.
const pinHeader = "Nats-Pin-Id"

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

// budgetRetry is how often a turn waiting on its user's budget tries again
// when no lease ended on this replica (another replica's may have).
const budgetRetry = 250 * time.Millisecond

// take starts the heartbeat of a delivered turn.
func (p *partitionRun) take(m jetstream.Msg, t Turn, seq uint64) takenTurn {
	ctx, cancel := context.WithCancel(p.turnCtx)
	go bus.Heartbeat(ctx, m, p.c.AckWait)
	p.order++
	return takenTurn{m: m, t: t, seq: seq, order: p.order, beat: cancel}
}

// budgeted reports whether the turn counts against a user's budget.
func (p *partitionRun) budgeted(t Turn) bool { return p.c.Budget != nil && t.User != "" }

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
		p.log.Error().Err(err).Str("subject", m.Subject()).Msg("undecodable turn dropped")
		if p.c.GiveUp != nil && t.ConversationID != "" {
			p.c.GiveUp(p.turnCtx, t, err)
		}
		_ = m.TermWithReason(clip.Bytes(err.Error(), 200))
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
	if err := m.NakWithDelay(p.c.parkDelay(t.Delivered)); err != nil {
		p.log.Warn().Err(err).Msg("turn not parked; it comes again after AckWait")
	}
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
	p.c.handle(p.ctx, p.turnCtx, next.m, next.t, attempt, p.log)
	next.beat()
	if p.budgeted(next.t) {
		p.c.Budget.Release(context.WithoutCancel(p.turnCtx), user, next.seq)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ct.turns = ct.turns[1:]
	ct.running = false
	p.active--
	p.runningBy[user]--
	p.heldBy[user]--
	if len(ct.turns) == 0 {
		delete(p.convs, cid)
	}
	p.scheduleLocked()
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

// giveBack gives the waiting turns back (nak), in order, once none runs.
// Parked turns are with the server already.
func (p *partitionRun) giveBack() {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for cid, ct := range p.convs {
		if !ct.waitingSince.IsZero() && p.c.Hooks.Waiting != nil {
			p.c.Hooks.Waiting(-1)
		}
		for _, x := range ct.turns {
			_ = x.m.Nak()
			x.beat()
		}
		delete(p.convs, cid)
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// handle runs one turn (heartbeated by its taker) until it is done
// (acked), given up (terminated) or given back (shutdown); a failure is
// retried here, after Backoff, so the conversation's later turns wait for
// it.
// attempt is the turn's start (the budget's count; without a budget, its
// delivery).
func (c *Consumer) handle(ctx, turnCtx context.Context, m jetstream.Msg, t Turn, attempt uint64, log zerolog.Logger) {
	hctx, cancel := context.WithCancel(turnCtx)
	defer cancel()
	log = log.With().Str("conversation_id", t.ConversationID).Uint64("seq", t.Sequence).Logger()
	for {
		err := c.run(hctx, t)
		switch {
		case err == nil:
			if aerr := m.Ack(); aerr != nil {
				log.Warn().Err(aerr).Msg("ack failed; the turn may be redelivered")
			}
			return
		case turnCtx.Err() != nil:
			// Shutting down: give it back now so another replica resumes it.
			_ = m.Nak()
			return
		case errors.Is(err, ErrPermanent) || (c.MaxDeliver > 0 && attempt >= uint64(c.MaxDeliver)):
			log.Error().Err(err).Uint64("delivered", t.Delivered).Uint64("attempt", attempt).Msg("turn given up")
			if c.GiveUp != nil {
				c.GiveUp(turnCtx, t, err)
			}
			_ = m.TermWithReason(clip.Bytes(err.Error(), 200))
			return
		}
		d := time.Second
		if c.Backoff != nil {
			d = c.Backoff(attempt)
		}
		log.Warn().Err(err).Dur("retry_in", d).Msg("turn failed; will retry")
		select {
		case <-time.After(d):
			t.Delivered++
			attempt++
		case <-ctx.Done():
			// Stopping: another replica retries it.
			_ = m.Nak()
			return
		}
	}
}

func (c *Consumer) decode(m jetstream.Msg, t *Turn) error {
	p, err := subjects.ParseTurn(m.Subject())
	if err != nil {
		return err
	}
	t.ConversationID = p.ConversationID
	if t.Sequence, err = SourceSequence(m.Headers().Get(SourceHeader)); err != nil {
		return err
	}
	if t.Env, err = protocol.Decode(m.Data()); err != nil {
		return err
	}
	t.User, _ = t.Env.Meta[edge.MetaUserID].(string)
	if t.Env.ConversationID != t.ConversationID {
		return fmt.Errorf("queue: envelope of %q on the subject of %q", t.Env.ConversationID, t.ConversationID)
	}
	return nil
}

// run calls the handler, turning a panic into a permanent error.
func (c *Consumer) run(ctx context.Context, t Turn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("turn handler panic: %v\n%s", p, debug.Stack()))
		}
	}()
	return c.Handler(ctx, t)
}

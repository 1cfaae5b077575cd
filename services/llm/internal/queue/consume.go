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
	Delivered uint64 // 1 on the first delivery, more after a replica died or gave the turn back
	Queued    time.Time
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
	Log       zerolog.Logger
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
		run := &partitionRun{c: c, ctx: ctx, turnCtx: turnCtx, k: k, log: log, convs: map[string]*convTurns{}}
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
// those of different conversations at once, those of one conversation one
// after the other in stream order.
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
}

// convTurns are a conversation's turns taken and not yet done; the first
// one runs when running is set.
type convTurns struct {
	turns   []takenTurn
	running bool
}

type takenTurn struct {
	m jetstream.Msg
	t Turn
	// seq is the turn's LLM_TURNS sequence: a redelivery has the same.
	seq uint64
	// beat stops the heartbeat that keeps the turn with this replica from
	// the moment it is taken (a turn waiting behind its conversation's
	// running one is not redelivered).
	beat context.CancelFunc
}

// take starts the heartbeat of a delivered turn.
func (p *partitionRun) take(m jetstream.Msg, t Turn, seq uint64) takenTurn {
	ctx, cancel := context.WithCancel(p.turnCtx)
	go bus.Heartbeat(ctx, m, p.c.AckWait)
	return takenTurn{m: m, t: t, seq: seq, beat: cancel}
}

// add takes a delivered turn: it runs at once unless a turn of its
// conversation runs, else after the ones before it.
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
		_ = m.TermWithReason(truncate(err.Error(), 200))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ct := p.convs[t.ConversationID]
	if ct == nil {
		ct = &convTurns{}
		p.convs[t.ConversationID] = ct
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
	p.startLocked(t.ConversationID, ct)
}

// startLocked runs the conversation's turns unless they run or are held.
func (p *partitionRun) startLocked(cid string, ct *convTurns) {
	if ct.running || p.held || len(ct.turns) == 0 {
		return
	}
	ct.running = true
	p.active++
	p.wg.Go(func() { p.conversation(cid, ct) })
}

// conversation runs a conversation's turns until none is left or the
// partition holds them.
func (p *partitionRun) conversation(cid string, ct *convTurns) {
	for {
		p.mu.Lock()
		// Held, or stopping (ctx ends before release holds the run): the
		// waiting turns stay for release to give back.
		if len(ct.turns) == 0 || p.held || p.ctx.Err() != nil {
			ct.running = false
			p.active--
			if len(ct.turns) == 0 {
				delete(p.convs, cid)
			}
			p.mu.Unlock()
			return
		}
		next := ct.turns[0]
		p.mu.Unlock()
		p.c.handle(p.ctx, p.turnCtx, next.m, next.t, p.log)
		next.beat()
		p.mu.Lock()
		ct.turns = ct.turns[1:]
		p.mu.Unlock()
	}
}

// awaitOrphans holds the turns while the consumer has turns pending that
// this replica did not take (another replica's, which died), until they
// come back here or AckWait has passed, whichever is first.
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
		for cid, ct := range p.convs {
			p.startLocked(cid, ct)
		}
	}()
}

// taken is how many turns this run holds.
func (p *partitionRun) taken() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ct := range p.convs {
		n += len(ct.turns)
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
func (p *partitionRun) giveBack() {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for cid, ct := range p.convs {
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
func (c *Consumer) handle(ctx, turnCtx context.Context, m jetstream.Msg, t Turn, log zerolog.Logger) {
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
		case errors.Is(err, ErrPermanent) || (c.MaxDeliver > 0 && t.Delivered >= uint64(c.MaxDeliver)):
			log.Error().Err(err).Uint64("delivered", t.Delivered).Msg("turn given up")
			if c.GiveUp != nil {
				c.GiveUp(turnCtx, t, err)
			}
			_ = m.TermWithReason(truncate(err.Error(), 200))
			return
		}
		d := time.Second
		if c.Backoff != nil {
			d = c.Backoff(t.Delivered)
		}
		log.Warn().Err(err).Dur("retry_in", d).Msg("turn failed; will retry")
		select {
		case <-time.After(d):
			t.Delivered++
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

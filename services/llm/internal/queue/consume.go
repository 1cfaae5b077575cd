package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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
// any error on the last allowed delivery) terminates it; another error gives
// it back with a delay. When ctx ends (shutdown) the turn is given back at
// once, so another replica takes it over.
type Handler func(ctx context.Context, t Turn) error

// Consumer pulls turns from every partition and runs them.
type Consumer struct {
	Queue   *Queue
	Handler Handler
	// GiveUp, when set, is called for a turn that is terminated (undecodable,
	// permanent error, deliveries exhausted), so the client can be told.
	GiveUp     func(ctx context.Context, t Turn, err error)
	AckWait    time.Duration // heartbeats are sent every AckWait/3
	MaxDeliver int
	Backoff    func(delivered uint64) time.Duration
	// Grace is how long running turns may finish after ctx ends before they
	// are cancelled and given back.
	Grace time.Duration
	// Forced, when closed, ends the grace at once: the process's stop was
	// forced (svcmain.Forced), running turns are given back now.
	Forced    <-chan struct{}
	FetchWait time.Duration // how long one pull request waits (default 30s)
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
	for k := range c.Queue.Partitions() {
		wg.Go(func() { c.partition(ctx, turnCtx, k) })
	}
	wg.Wait()
	return nil
}

// partition pulls one turn at a time: a replica holds a single pull request
// per partition, so when it is busy the partition's next turn goes to
// whichever other replica is waiting.
func (c *Consumer) partition(ctx, turnCtx context.Context, k int) {
	cons := c.Queue.Consumer(k)
	log := c.Log.With().Int("partition", k).Logger()
	wait := c.FetchWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	failures := 0
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, wait)
		m, err := cons.Next(bus.NextOpts(fctx)...)
		cancel()
		if err == nil {
			c.handle(turnCtx, k, m, log)
		}
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || isTimeout(err):
			// An idle partition: the pull ended without a turn.
			failures = 0
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, nats.ErrNoResponders):
			// The server restarted (the consumer lived in memory): recreate it.
			if cn, cerr := c.Queue.ensureConsumer(ctx, k); cerr == nil {
				cons = cn
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
				return
			}
		}
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func (c *Consumer) handle(turnCtx context.Context, k int, m jetstream.Msg, log zerolog.Logger) {
	md, _ := m.Metadata()
	t := Turn{Partition: k, Delivered: 1}
	if md != nil {
		t.Delivered, t.Queued = md.NumDelivered, md.Timestamp
	}
	if err := c.decode(m, &t); err != nil {
		log.Error().Err(err).Str("subject", m.Subject()).Msg("undecodable turn dropped")
		if c.GiveUp != nil && t.ConversationID != "" {
			c.GiveUp(turnCtx, t, err)
		}
		_ = m.TermWithReason(truncate(err.Error(), 200))
		return
	}
	hctx, cancel := context.WithCancel(turnCtx)
	defer cancel()
	go bus.Heartbeat(hctx, m, c.AckWait) // a long answer stays with this replica
	err := c.run(hctx, t)
	log = log.With().Str("conversation_id", t.ConversationID).Uint64("seq", t.Sequence).Logger()
	switch {
	case err == nil:
		if aerr := m.Ack(); aerr != nil {
			log.Warn().Err(aerr).Msg("ack failed; the turn may be redelivered")
		}
	case turnCtx.Err() != nil:
		// Shutting down: give it back now so another replica resumes it.
		_ = m.Nak()
	case errors.Is(err, ErrPermanent) || (c.MaxDeliver > 0 && t.Delivered >= uint64(c.MaxDeliver)):
		log.Error().Err(err).Uint64("delivered", t.Delivered).Msg("turn given up")
		if c.GiveUp != nil {
			c.GiveUp(turnCtx, t, err)
		}
		_ = m.TermWithReason(truncate(err.Error(), 200))
	default:
		d := time.Second
		if c.Backoff != nil {
			d = c.Backoff(t.Delivered)
		}
		log.Warn().Err(err).Dur("retry_in", d).Msg("turn failed; will retry")
		_ = m.NakWithDelay(d)
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

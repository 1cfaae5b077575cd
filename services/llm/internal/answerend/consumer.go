// Package answerend feeds the ends of answers to work done after them, off
// the turn path (the judge, titles): a durable consumer of the
// conversations' server envelopes, shared by every llm replica, that hands
// each answer's end — an AssistantSentence with isFinal, an
// AssistantMessage — to a handler, Concurrency at a time, and acknowledges
// every other envelope at once.
package answerend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Handler does the work of one answer's end: id is the answer, seq its
// end's CONVERSATIONS sequence. nil acknowledges it; an error retries it
// with back-off, up to MaxDeliver tries, then GiveUp is told.
type Handler func(ctx context.Context, cid, id string, seq uint64) error

// Consumer is one durable consumer of answer ends.
type Consumer struct {
	JS jetstream.JetStream
	// Name is the durable consumer (pkg/natsauth lists it); Description says what it is for.
	Name, Description string
	Handle            Handler
	// GiveUp is told of an answer whose last try failed (it is dropped,
	// never dead-lettered: work after an answer is never urgent).
	GiveUp func(id string, err error)
	// Concurrency bounds the answers handled at once by this replica.
	Concurrency int
	// Timeout bounds one answer's handling.
	Timeout time.Duration
	// MaxDeliver: tries of one answer (default 5).
	MaxDeliver int
	Log        zerolog.Logger
}

// Run creates (or updates) the consumer and handles answer ends until ctx
// ends; then it pulls no more, hands back what it holds, and the answers
// being handled are cancelled and handed back too.
//
// The consumer's one filter is every server envelope (the llm's NATS user
// may create consumers on CONVERSATIONS with that filter only); a new
// deployment handles the answers from now on, not history.
func (c *Consumer) Run(ctx context.Context) error {
	maxDeliver := c.MaxDeliver
	if maxDeliver <= 0 {
		maxDeliver = 5
	}
	cons, err := c.JS.CreateOrUpdateConsumer(ctx, bus.StreamConversations, jetstream.ConsumerConfig{
		Durable:       c.Name,
		Description:   c.Description,
		FilterSubject: subjects.ServerAll("*"),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       3*c.Timeout + 30*time.Second,
		MaxDeliver:    maxDeliver,
		MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("%s: consumer: %w", c.Name, err)
	}
	backoff := func(attempt uint64) time.Duration { return min(5*time.Second<<(attempt-1), time.Minute) }
	r := bus.NewRouter(c.Name, bus.NewDeadLetters(c.JS), c.Log, bus.WithMaxDeliver(maxDeliver+1), bus.WithBackoff(backoff))
	handle := func(ctx context.Context, cid, id string, d bus.Delivery) error {
		hctx, cancel := context.WithTimeout(ctx, 3*c.Timeout)
		defer cancel()
		err := c.Handle(hctx, cid, id, d.Sequence)
		if err != nil && ctx.Err() == nil && d.NumDelivered >= uint64(maxDeliver) {
			if c.GiveUp != nil {
				c.GiveUp(id, err)
			}
			return nil
		}
		return err
	}
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, s *protocol.AssistantSentence, d bus.Delivery) error {
		if s.IsFinal == nil || !*s.IsFinal {
			return nil
		}
		return handle(ctx, s.ConversationID, s.PreviousID, d)
	})
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, m *protocol.AssistantMessage, d bus.Delivery) error {
		return handle(ctx, m.ConversationID, m.ID, d)
	})

	workers := max(c.Concurrency, 1)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	// Few messages buffered: those waiting for a slot count against AckWait.
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ctx.Err() != nil {
			r.Settle(ctx, m, bus.GiveBack())
			return
		}
		if !isAnswerEnd(m.Subject()) {
			r.HandleMsg(ctx, m)
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			r.Settle(ctx, m, bus.GiveBack())
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.HandleMsg(ctx, m)
		}()
	}, bus.FollowOpts(jetstream.PullMaxMessages(4*workers+16))...)
	if err != nil {
		return fmt.Errorf("%s: consume: %w", c.Name, err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	wg.Wait()
	return nil
}

// isAnswerEnd says whether a server subject may carry the end of an answer.
func isAnswerEnd(subject string) bool {
	p, err := subjects.Parse(subject)
	if err != nil {
		return false
	}
	return p.TypeToken == protocol.TypeAssistantSentence.Token() || p.TypeToken == protocol.TypeAssistantMessage.Token()
}

// RunRetrying runs c until ctx ends, starting it again 5 s after a
// failure (NATS not yet reachable, permissions): the work after answers
// never stops turns. stop cancels it and waits.
func RunRetrying(ctx context.Context, c *Consumer) (stop func()) {
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			err := c.Run(cctx)
			if err == nil || cctx.Err() != nil {
				return
			}
			c.Log.Error().Err(err).Msg("answer-end consumer failed; retrying in 5s")
			select {
			case <-cctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

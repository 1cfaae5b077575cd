package judge

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

// ConsumerName is the judge's durable consumer on CONVERSATIONS, shared by
// every llm replica (pkg/natsauth lists it).
const ConsumerName = "llm-judge"

// maxDeliver: tries of one answer; after the last the answer is dropped and
// counted (unavailable), never dead-lettered.
const maxDeliver = 5

// Consumer feeds the ends of answers to a Judge, Concurrency at a time.
type Consumer struct {
	JS    jetstream.JetStream
	Judge *Judge
	// Concurrency bounds the answers judged at once by this replica
	// (ALICIA_JUDGE_CONCURRENCY).
	Concurrency int
	// Timeout bounds one answer's judging: the wait for persistence, the
	// reads and both judge requests (ALICIA_JUDGE_TIMEOUT, twice over).
	Timeout time.Duration
	Log     zerolog.Logger
}

// Run creates (or updates) the consumer and judges until ctx ends; then it
// pulls no more, hands back what it holds, and the answers being judged are
// cancelled and handed back too (judging is never urgent).
//
// The consumer's one filter is every server envelope (the llm's NATS user
// may create consumers on CONVERSATIONS with that filter only, like the
// memory service's extraction): the ends of answers — an AssistantSentence
// with isFinal, an AssistantMessage — go to the judge; every other envelope
// is acknowledged at once, without waiting for a judging slot.
func (c *Consumer) Run(ctx context.Context) error {
	ackWait := 3*c.Timeout + 30*time.Second
	cons, err := c.JS.CreateOrUpdateConsumer(ctx, bus.StreamConversations, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "llm: judges answers after they end",
		FilterSubject: subjects.ServerAll("*"),
		// A new deployment judges the answers from now on, not history.
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    maxDeliver,
		MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("judge: consumer %s: %w", ConsumerName, err)
	}
	backoff := func(attempt uint64) time.Duration { return min(5*time.Second<<(attempt-1), time.Minute) }
	r := bus.NewRouter(ConsumerName, bus.NewDeadLetters(c.JS), c.Log, bus.WithMaxDeliver(maxDeliver+1), bus.WithBackoff(backoff))
	judge := func(ctx context.Context, id string, d bus.Delivery) error {
		jctx, cancel := context.WithTimeout(ctx, 3*c.Timeout)
		defer cancel()
		err := c.Judge.Answer(jctx, id, d.Sequence)
		if err != nil && ctx.Err() == nil && d.NumDelivered >= maxDeliver {
			c.Judge.GiveUp(id, err)
			return nil
		}
		return err
	}
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, s *protocol.AssistantSentence, d bus.Delivery) error {
		if s.IsFinal == nil || !*s.IsFinal {
			return nil
		}
		return judge(ctx, s.PreviousID, d)
	})
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, m *protocol.AssistantMessage, d bus.Delivery) error {
		return judge(ctx, m.ID, d)
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
		if !answerEnd(m.Subject()) {
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
		return fmt.Errorf("judge: consume: %w", err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	wg.Wait()
	return nil
}

// answerEnd says whether a server subject may carry the end of an answer.
func answerEnd(subject string) bool {
	p, err := subjects.Parse(subject)
	if err != nil {
		return false
	}
	return p.TypeToken == protocol.TypeAssistantSentence.Token() || p.TypeToken == protocol.TypeAssistantMessage.Token()
}

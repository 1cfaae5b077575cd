package ports

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

// ClientActions handles client MemoryActions (*app.App).
type ClientActions interface {
	ClientAction(ctx context.Context, env protocol.Envelope, act *protocol.MemoryAction, seq uint64, lastAttempt bool) error
}

// Extraction handles final answers (*app.App).
type Extraction interface {
	ExtractTurn(ctx context.Context, answerID string, seq uint64) error
}

// Consumer settings.
const (
	actionMaxDeliver     = 5
	clientActionTimeout  = 30 * time.Second
	extractionMaxDeliver = 5
	extractionTimeout    = 3 * time.Minute
)

// Runner consumes until ctx ends; the messages it is handling then finish
// until work ends (the drain: svcmain.WorkContext), and are handed back
// (nak) if work ends first.
type Runner func(ctx, work context.Context) error

// ClientActionsConsumer creates (or updates) the durable consumer name of
// alicia.conv.*.client.memory_action, shared by every replica, and returns
// what consumes it.
func ClientActionsConsumer(ctx context.Context, js jetstream.JetStream, name string, uc ClientActions, log zerolog.Logger) (Runner, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamConversations, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "memory: embeds and confirms client MemoryActions",
		FilterSubject: subjects.AllOfType(subjects.OriginClient, protocol.TypeMemoryAction),
		// A new consumer starts with the actions sent from now on, not with
		// every action ever sent.
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       clientActionTimeout + 10*time.Second,
		MaxDeliver:    actionMaxDeliver,
		MaxAckPending: 256,
	})
	if err != nil {
		return nil, fmt.Errorf("memory: consumer %s: %w", name, err)
	}
	r := bus.NewRouter(name, bus.NewDeadLetters(js), log, bus.WithMaxDeliver(actionMaxDeliver))
	bus.Handle(r, func(ctx context.Context, env protocol.Envelope, act *protocol.MemoryAction, d bus.Delivery) error {
		ctx, cancel := context.WithTimeout(ctx, clientActionTimeout)
		defer cancel()
		return uc.ClientAction(ctx, env, act, d.Sequence, d.NumDelivered >= actionMaxDeliver)
	})
	return func(ctx, work context.Context) error { return runConcurrent(ctx, work, cons, r, 16) }, nil
}

// ExtractionConsumer creates (or updates) the durable consumer name of the
// final output of every answer (an AssistantSentence with isFinal, or an
// AssistantMessage), shared by every replica, and returns what consumes it
// and extracts memories from each turn. The consumer has one filter, every
// server envelope (the router acknowledges and ignores the other types):
// memory's NATS user may create consumers on CONVERSATIONS with single
// filters only (pkg/natsauth), and reading server envelopes is within its
// boundary (it reads whole conversations from PostgreSQL); client envelopes
// stay out of it.
func ExtractionConsumer(ctx context.Context, js jetstream.JetStream, name string, uc Extraction, log zerolog.Logger) (Runner, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamConversations, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "memory: extracts memories after each turn",
		FilterSubject: subjects.ServerAll("*"),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       extractionTimeout + 30*time.Second,
		MaxDeliver:    extractionMaxDeliver,
		MaxAckPending: 256,
	})
	if err != nil {
		return nil, fmt.Errorf("memory: consumer %s: %w", name, err)
	}
	// A backend outage lasts longer than the router's default backoff.
	backoff := func(attempt uint64) time.Duration { return min(5*time.Second<<(attempt-1), time.Minute) }
	r := bus.NewRouter(name, bus.NewDeadLetters(js), log, bus.WithMaxDeliver(extractionMaxDeliver), bus.WithBackoff(backoff))
	extract := func(ctx context.Context, answerID string, seq uint64) error {
		ctx, cancel := context.WithTimeout(ctx, extractionTimeout)
		defer cancel()
		return uc.ExtractTurn(ctx, answerID, seq)
	}
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, s *protocol.AssistantSentence, d bus.Delivery) error {
		if s.IsFinal == nil || !*s.IsFinal {
			return nil
		}
		return extract(ctx, s.PreviousID, d.Sequence)
	})
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, m *protocol.AssistantMessage, d bus.Delivery) error {
		return extract(ctx, m.ID, d.Sequence)
	})
	return func(ctx, work context.Context) error { return runConcurrent(ctx, work, cons, r, 8) }, nil
}

// runConcurrent consumes cons with up to workers messages handled at once
// (the consume callback alone would take one at a time), until ctx ends.
// Then it pulls no more: what the pulls already brought is handed back at
// once (nak) for another replica, and the messages being handled finish on
// work (cancelled there, the router naks them).
func runConcurrent(ctx, work context.Context, cons jetstream.Consumer, r *bus.Router, workers int) error {
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ctx.Err() != nil {
			r.Settle(ctx, m, bus.GiveBack())
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
			r.HandleMsg(work, m)
		}()
	}, bus.FollowOpts()...)
	if err != nil {
		return fmt.Errorf("memory: consume: %w", err)
	}
	<-ctx.Done()
	// Drain delivers what is buffered to the callback, which naks it.
	cc.Drain()
	<-cc.Closed()
	wg.Wait()
	return nil
}

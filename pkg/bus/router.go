package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Delivery is what the router knows about one JetStream message besides the envelope.
type Delivery struct {
	Subject      string
	Stream       string
	Sequence     uint64 // stream sequence
	NumDelivered uint64
	Time         time.Time
}

// DeliveryOf reads where a JetStream message came from.
func DeliveryOf(m jetstream.Msg) Delivery {
	d := Delivery{Subject: m.Subject()}
	if md, err := m.Metadata(); err == nil {
		d.Stream, d.Sequence, d.NumDelivered, d.Time = md.Stream, md.Sequence.Stream, md.NumDelivered, md.Timestamp
	}
	return d
}

// HandlerFunc handles one decoded envelope. nil acks; an error wrapped with
// Permanent dead-letters; any other error is retried with backoff.
type HandlerFunc func(ctx context.Context, env protocol.Envelope, d Delivery) error

// Middleware wraps a handler (tracing, metrics, logging, timeouts).
type Middleware func(HandlerFunc) HandlerFunc

// Router decodes JetStream messages into protocol envelopes and dispatches
// them to typed handlers by message type.
type Router struct {
	name     string
	handlers map[protocol.MessageType]HandlerFunc
	fallback HandlerFunc
	mw       []Middleware
	settle   Settler
}

// RouterOption configures a Router.
type RouterOption func(*Router)

// WithMaxDeliver makes the router dead-letter a message on its n-th failed
// delivery (match the consumer's MaxDeliver). Default 10.
func WithMaxDeliver(n int) RouterOption { return func(r *Router) { r.settle.MaxDeliver = n } }

// WithBackoff sets the redelivery delay for retryable errors.
func WithBackoff(f func(attempt uint64) time.Duration) RouterOption {
	return func(r *Router) { r.settle.Backoff = f }
}

// WithFallback handles envelope types that have no handler (default: ack and ignore).
func WithFallback(h HandlerFunc) RouterOption { return func(r *Router) { r.fallback = h } }

// NewRouter returns a router for the consumer called name; dead letters go to
// subjects.DeadLetter(name).
func NewRouter(name string, dlq *DeadLetters, log zerolog.Logger, opts ...RouterOption) *Router {
	r := &Router{
		name:     name,
		handlers: map[protocol.MessageType]HandlerFunc{},
		settle:   Settler{Consumer: name, DeadLetters: dlq, MaxDeliver: 10, Backoff: DefaultBackoff, Log: log},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Use appends middleware; the first added is the outermost.
func (r *Router) Use(mw ...Middleware) { r.mw = append(r.mw, mw...) }

// Handle registers a typed handler for the message type of T.
func Handle[T protocol.Body](r *Router, h func(ctx context.Context, env protocol.Envelope, body T, d Delivery) error) {
	var zero T
	t := zero.MessageType()
	r.handlers[t] = func(ctx context.Context, env protocol.Envelope, d Delivery) error {
		body, ok := env.Body.(T)
		if !ok {
			return Permanent(fmt.Errorf("body of %s is %T, want %T", t, env.Body, zero))
		}
		return h(ctx, env, body, d)
	}
}

// Run consumes cons until ctx is cancelled, then stops and drains.
func (r *Router) Run(ctx context.Context, cons jetstream.Consumer) error {
	cc, err := cons.Consume(func(m jetstream.Msg) { r.HandleMsg(ctx, m) }, FollowOpts()...)
	if err != nil {
		return fmt.Errorf("bus: consume %s: %w", r.name, err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}

// HandleMsg processes one message: decode, dispatch, then settle it (Settler).
func (r *Router) HandleMsg(ctx context.Context, m jetstream.Msg) {
	d := DeliveryOf(m)
	r.settle.Process(ctx, m, func() error { return r.dispatch(ctx, m.Data(), d) })
}

// Settle settles m with an outcome decided outside a handler (a message
// given back unhandled while stopping).
func (r *Router) Settle(ctx context.Context, m jetstream.Msg, o Outcome) { r.settle.Settle(ctx, m, o) }

func (r *Router) dispatch(ctx context.Context, data []byte, d Delivery) error {
	env, err := protocol.Decode(data)
	if err != nil {
		return Permanent(err)
	}
	h, ok := r.handlers[env.Type]
	if !ok {
		if r.fallback == nil {
			return nil
		}
		h = r.fallback
	}
	for i := len(r.mw) - 1; i >= 0; i-- {
		h = r.mw[i](h)
	}
	return h(ctx, env, d)
}

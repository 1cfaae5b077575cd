package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/clip"
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
	name       string
	dlq        *DeadLetters
	log        zerolog.Logger
	handlers   map[protocol.MessageType]HandlerFunc
	fallback   HandlerFunc
	mw         []Middleware
	maxDeliver int
	backoff    func(attempt uint64) time.Duration
}

// RouterOption configures a Router.
type RouterOption func(*Router)

// WithMaxDeliver makes the router dead-letter a message on its n-th failed
// delivery (match the consumer's MaxDeliver). Default 10.
func WithMaxDeliver(n int) RouterOption { return func(r *Router) { r.maxDeliver = n } }

// WithBackoff sets the redelivery delay for retryable errors.
func WithBackoff(f func(attempt uint64) time.Duration) RouterOption {
	return func(r *Router) { r.backoff = f }
}

// WithFallback handles envelope types that have no handler (default: ack and ignore).
func WithFallback(h HandlerFunc) RouterOption { return func(r *Router) { r.fallback = h } }

// NewRouter returns a router for the consumer called name; dead letters go to
// subjects.DeadLetter(name).
func NewRouter(name string, dlq *DeadLetters, log zerolog.Logger, opts ...RouterOption) *Router {
	r := &Router{
		name:       name,
		dlq:        dlq,
		log:        log.With().Str("consumer", name).Logger(),
		handlers:   map[protocol.MessageType]HandlerFunc{},
		maxDeliver: 10,
		backoff:    DefaultBackoff,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// DefaultBackoff doubles from 100 ms up to 30 s.
func DefaultBackoff(attempt uint64) time.Duration {
	d := 100 * time.Millisecond
	for i := uint64(1); i < attempt && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
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

// HandleMsg processes one message: decode, dispatch, then ack, nak or dead-letter.
func (r *Router) HandleMsg(ctx context.Context, m jetstream.Msg) {
	d := DeliveryOf(m)
	err := r.dispatch(ctx, m.Data(), d)
	log := r.log.With().Str("subject", d.Subject).Uint64("seq", d.Sequence).Logger()
	switch {
	case err == nil:
		if aerr := m.Ack(); aerr != nil {
			log.Warn().Err(aerr).Msg("ack failed; the message will be redelivered")
		}
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		_ = m.Nak() // shutting down: someone else (or our restart) takes it
	case errors.Is(err, ErrPermanent) || (r.maxDeliver > 0 && d.NumDelivered >= uint64(r.maxDeliver)):
		log.Error().Err(err).Uint64("delivered", d.NumDelivered).Msg("dead-lettering envelope")
		if derr := r.dlq.Put(ctx, r.name, m.Data(), d, err); derr != nil {
			log.Error().Err(derr).Msg("dead letter failed; retrying the message")
			_ = m.NakWithDelay(r.backoff(d.NumDelivered))
			return
		}
		_ = m.TermWithReason(clip.Bytes(err.Error(), 200))
	default:
		delay := r.backoff(d.NumDelivered)
		var ra *RetryAfter
		if errors.As(err, &ra) {
			delay = ra.Delay
		}
		log.Warn().Err(err).Dur("delay", delay).Msg("handler failed; will retry")
		_ = m.NakWithDelay(delay)
	}
}

func (r *Router) dispatch(ctx context.Context, data []byte, d Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("handler panic: %v\n%s", p, debug.Stack()))
		}
	}()
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

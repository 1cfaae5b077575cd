package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Routes is one service's table of core-NATS subscriptions: subject (and
// queue group) → a handler of a typed body. Subscribe makes them all, or
// none; one Close ends them. A message a route cannot read (an envelope
// that does not decode, a body of another type, a subject without the
// conversation it should name) or that its handler refuses is dropped,
// counted (alicia_core_dropped_total) and logged: core NATS has no
// redelivery and no dead letters, so that is all that can be done with it.
// It is Router's counterpart for what JetStream does not carry.
type Routes struct {
	name   string
	log    zerolog.Logger
	routes []*coreRoute
}

// Inbound is what a core-NATS route knows of one message besides its body.
type Inbound struct {
	Subject string
	Reply   string
	Header  nats.Header
	// Conversation is read from the subject by routes given
	// ConversationSubject or SpecSubject; "" otherwise.
	Conversation string
}

// Reasons a route drops a message (the counter's reason label).
const (
	DropEnvelope = "envelope" // the data does not decode
	DropType     = "type"     // a body of another type than the route's
	DropSubject  = "subject"  // the subject does not name a conversation
	DropHandler  = "handler"  // the handler returned an error (or panicked)
)

type coreRoute struct {
	name, subject, queue string
	msgLimit, byteLimit  int
	parse                func(subject string) (string, error)
	onDrop               func(m *nats.Msg, err error)
	// handle returns the reason and the error of a dropped message.
	handle func(ctx context.Context, m *nats.Msg, in Inbound) (string, error)
}

// RouteOption configures one route.
type RouteOption func(*coreRoute)

// Queue puts the route's subscription in a queue group: one member gets each message.
func Queue(group string) RouteOption { return func(r *coreRoute) { r.queue = group } }

// PendingLimits sets the subscription's pending limits (nats.go's default
// is 65,536 messages and 64 MiB; beyond them messages are dropped).
func PendingLimits(msgs, bytes int) RouteOption {
	return func(r *coreRoute) { r.msgLimit, r.byteLimit = msgs, bytes }
}

// ConversationSubject reads Inbound.Conversation from a conversation
// subject (alicia.conv.{cid}.…, subjects.Parse).
func ConversationSubject() RouteOption {
	return func(r *coreRoute) {
		r.parse = func(s string) (string, error) {
			p, err := subjects.Parse(s)
			return p.ConversationID, err
		}
	}
}

// SpecSubject reads Inbound.Conversation from a speculative subject
// (alicia.spec.{cid}.…, subjects.SpecConversation).
func SpecSubject() RouteOption {
	return func(r *coreRoute) { r.parse = subjects.SpecConversation }
}

// OnDrop is told of a message the route dropped, after it was counted and
// logged (for a route that must still act on it, e.g. by forgetting what
// the message might have changed).
func OnDrop(f func(m *nats.Msg, err error)) RouteOption {
	return func(r *coreRoute) { r.onDrop = f }
}

// NewRoutes returns an empty table called name (the counter's table label:
// the service, or the service and its part).
func NewRoutes(name string, log zerolog.Logger) *Routes {
	return &Routes{name: name, log: log.With().Str("routes", name).Logger()}
}

// On routes protocol envelopes whose body is a T to h. An envelope of
// another type is dropped (DropType): a route's subject names one type. A
// non-nil error from h drops the message (DropHandler); return nil for a
// message that is fine but not for this replica.
func On[T protocol.Body](rt *Routes, name, subject string, h func(ctx context.Context, env protocol.Envelope, body T, in Inbound) error, opts ...RouteOption) {
	var zero T
	decode := func(data []byte) (protocol.Envelope, T, string, error) {
		env, err := protocol.Decode(data)
		if err != nil {
			return env, zero, DropEnvelope, err
		}
		body, ok := env.Body.(T)
		if !ok {
			return env, zero, DropType, fmt.Errorf("body of %s is %T, want %T", env.Type, env.Body, zero)
		}
		return env, body, "", nil
	}
	rt.add(name, subject, func(ctx context.Context, m *nats.Msg, in Inbound) (string, error) {
		env, body, reason, err := decode(m.Data)
		if err != nil {
			return reason, err
		}
		return DropHandler, h(ctx, env, body, in)
	}, opts)
}

// OnDecoded routes messages that are not (or not only) envelopes of one
// type: decode reads the data (JSON, Raw, protocol.Decode for any envelope
// type); its error drops the message (DropEnvelope).
func OnDecoded[T any](rt *Routes, name, subject string, decode func(data []byte) (T, error), h func(ctx context.Context, body T, in Inbound) error, opts ...RouteOption) {
	rt.add(name, subject, func(ctx context.Context, m *nats.Msg, in Inbound) (string, error) {
		body, err := decode(m.Data)
		if err != nil {
			return DropEnvelope, err
		}
		return DropHandler, h(ctx, body, in)
	}, opts)
}

// JSON decodes a JSON message (for OnDecoded).
func JSON[T any](data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// Raw hands the data as it came (for OnDecoded: a route that reads no body,
// or decodes it itself).
func Raw(data []byte) ([]byte, error) { return data, nil }

func (rt *Routes) add(name, subject string, handle func(context.Context, *nats.Msg, Inbound) (string, error), opts []RouteOption) {
	r := &coreRoute{name: name, subject: subject, handle: handle}
	for _, o := range opts {
		o(r)
	}
	rt.routes = append(rt.routes, r)
}

// Subscribe makes every route's subscription on nc; handlers get ctx (its
// values: a core-NATS message has no context of its own). When one fails,
// those made before it are unsubscribed. It returns once the server has
// them all (a flush).
func (rt *Routes) Subscribe(ctx context.Context, nc *nats.Conn) (*Subscriptions, error) {
	s := &Subscriptions{byName: map[string]*nats.Subscription{}}
	for _, r := range rt.routes {
		sub, err := nc.QueueSubscribe(r.subject, r.queue, func(m *nats.Msg) { rt.deliver(ctx, r, m) })
		if err == nil && (r.msgLimit != 0 || r.byteLimit != 0) {
			if err = sub.SetPendingLimits(r.msgLimit, r.byteLimit); err != nil {
				_ = sub.Unsubscribe()
			}
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("bus: %s: subscribe %s to %s: %w", rt.name, r.name, r.subject, err)
		}
		s.subs = append(s.subs, sub)
		s.byName[r.name] = sub
	}
	if err := nc.Flush(); err != nil {
		s.Close()
		return nil, fmt.Errorf("bus: %s: subscribe: %w", rt.name, err)
	}
	return s, nil
}

// deliver runs one message through its route.
func (rt *Routes) deliver(ctx context.Context, r *coreRoute, m *nats.Msg) {
	in := Inbound{Subject: m.Subject, Reply: m.Reply, Header: m.Header}
	reason, err := DropSubject, error(nil)
	if r.parse != nil {
		in.Conversation, err = r.parse(m.Subject)
	}
	if err == nil {
		reason, err = rt.run(ctx, r, m, in)
	}
	if err == nil {
		return
	}
	coreDropped().WithLabelValues(rt.name, r.name, reason).Inc()
	rt.log.Warn().Str("route", r.name).Str("subject", m.Subject).Str("reason", reason).
		Str("error", clip.Bytes(err.Error(), 200)).Msg("core-NATS message dropped")
	if r.onDrop != nil {
		r.onDrop(m, err)
	}
}

func (rt *Routes) run(ctx context.Context, r *coreRoute, m *nats.Msg, in Inbound) (reason string, err error) {
	defer func() {
		if p := recover(); p != nil {
			reason, err = DropHandler, fmt.Errorf("handler panic: %v\n%s", p, debug.Stack())
		}
	}()
	return r.handle(ctx, m, in)
}

// Subscriptions are a table's subscriptions.
type Subscriptions struct {
	mu     sync.Mutex
	subs   []*nats.Subscription
	byName map[string]*nats.Subscription
}

// Close unsubscribes every route; safe to call more than once.
func (s *Subscriptions) Close() {
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
}

// Unsubscribe ends one route's subscription (e.g. a queue route a draining
// replica leaves while it finishes what it holds); Close still ends the others.
func (s *Subscriptions) Unsubscribe(route string) {
	s.mu.Lock()
	sub := s.byName[route]
	s.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

// Each calls f with every route's subscription (pending and dropped
// counts).
func (s *Subscriptions) Each(f func(route string, sub *nats.Subscription)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sub := range s.byName {
		f(name, sub)
	}
}

var (
	coreDroppedOnce sync.Once
	coreDroppedVec  *prometheus.CounterVec
)

// coreDropped counts the core-NATS messages route tables dropped. Labels
// are bounded: table and route names are written in code, reasons are the
// Drop* constants.
func coreDropped() *prometheus.CounterVec {
	coreDroppedOnce.Do(func() {
		coreDroppedVec = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Name: "core_dropped_total",
			Help: "Core-NATS messages a route table dropped unhandled, by table, route and reason (envelope: does not decode; type: another body type; subject: names no conversation; handler: refused)."},
			[]string{"table", "route", "reason"})
		prometheus.DefaultRegisterer.MustRegister(coreDroppedVec)
	})
	return coreDroppedVec
}

// RouteMetrics registers the dropped-message counter (it is otherwise
// registered at the first drop, and absent from /metrics until then).
func RouteMetrics() prometheus.Collector { return coreDropped() }

// Dropped is how many messages the route of table dropped, whatever the
// reason (tests and diagnostics).
func Dropped(table, route string) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { coreDropped().Collect(ch); close(ch) }()
	var n float64
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["table"] == table && labels["route"] == route {
			n += pb.GetCounter().GetValue()
		}
	}
	return n
}

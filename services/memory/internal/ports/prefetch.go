package ports

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/memory/internal/app"
)

var tracer = otel.Tracer("github.com/alicia-voice/alicia/services/memory")

// PrefetchQueue is the queue group of the user-message subscription: one
// replica searches for each message.
const PrefetchQueue = "memory-prefetch"

// maxPrefetching bounds the prefetched searches running at once; a message
// beyond it is not prefetched (its turn searches as before).
const maxPrefetching = 32

// WriteSubjects are where a MemoryAction can be published for persistence
// to apply: the system subject and a conversation's subjects of every
// origin (only clients' carry any today; the others are watched because
// persistence would apply them too).
func WriteSubjects() []string {
	return []string{subjects.System(protocol.TypeMemoryAction),
		subjects.AllOfType(subjects.OriginClient, protocol.TypeMemoryAction),
		subjects.AllOfType(subjects.OriginServer, protocol.TypeMemoryAction),
		subjects.AllOfType(subjects.OriginAgent, protocol.TypeMemoryAction)}
}

// writeRoutes name the routes of WriteSubjects, in order.
var writeRoutes = []string{"system", "client", "server", "agent"}

// Writes is the subscription of every replica to the memory writes on the
// bus (core NATS: a message arrives when it is published, before
// persistence can have applied it). It is the prefetch cache's Watch.
type Writes struct {
	nc   *nats.Conn
	subs *bus.Subscriptions

	mu sync.Mutex
	// ready is the epoch in which the subscriptions are known to be in
	// place on the server (a flush answered after they were sent): after a
	// reconnection the client sends them again, and writes published before
	// the server has them are not heard.
	ready    uint64
	flushing bool
}

// NewWrites returns the watch of nc's write subscriptions; Start makes them.
func NewWrites(nc *nats.Conn) *Writes { return &Writes{nc: nc} }

// Start subscribes to WriteSubjects and tells written of every write: the
// user in its meta ("" when it cannot be read: every user's entries go) and
// its JetStream message id. Call it once, before the cache is used; Stop
// when done.
func (w *Writes) Start(written func(userID, msgID string), log zerolog.Logger) error {
	rt := bus.NewRoutes("memory-writes", log)
	// A write that cannot be read (counted and logged) drops every user's
	// prefetched searches. The client's pending limits stay: a write
	// dropped by a slow handler changes the epoch, and every entry goes.
	unreadable := bus.OnDrop(func(m *nats.Msg, _ error) { written("", m.Header.Get(jetstream.MsgIDHeader)) })
	for i, s := range WriteSubjects() {
		bus.OnDecoded(rt, writeRoutes[i], s, protocol.Decode, func(_ context.Context, env protocol.Envelope, in bus.Inbound) error {
			user, _ := env.Meta[app.MetaUserID].(string)
			written(user, in.Header.Get(jetstream.MsgIDHeader))
			return nil
		}, unreadable)
	}
	subs, err := rt.Subscribe(context.Background(), w.nc)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.subs = subs
	w.mu.Unlock()
	// The subscriptions are in place on the server before the first entry.
	e := w.Epoch()
	if err := w.nc.Flush(); err != nil {
		w.Stop()
		return err
	}
	w.mu.Lock()
	w.ready = e
	w.mu.Unlock()
	return nil
}

// Epoch changes when a write can have been missed: the connection
// reconnected (writes published while it was away never arrive; the
// client counts the reconnection before it sends the subscriptions again)
// or a subscription dropped a message.
func (w *Writes) Epoch() uint64 {
	n := w.nc.Stats().Reconnects
	w.each(func(s *nats.Subscription) {
		d, _ := s.Dropped()
		n += uint64(d)
	})
	return n
}

// Settled reports that the connection is up with its subscriptions in
// place on the server, and that every write message it has received has
// been handled. The client counts a message as pending from the moment its
// read loop queues it until the handler has returned, and a request is
// read after every message the server sent before it, so a request handler
// seeing Settled knows of every write published before its request.
func (w *Writes) Settled() bool {
	if !w.nc.IsConnected() {
		return false
	}
	e := w.Epoch()
	w.mu.Lock()
	ready := w.ready == e
	if !ready && !w.flushing {
		// Reconnected (or a message was dropped): settled again once a
		// flush sent after the subscriptions is answered.
		w.flushing = true
		go func() {
			err := w.nc.FlushTimeout(5 * time.Second)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.flushing = false
			if err == nil {
				w.ready = e
			}
		}()
	}
	w.mu.Unlock()
	if !ready {
		return false
	}
	settled := true
	w.each(func(s *nats.Subscription) {
		if n, _, err := s.Pending(); err != nil || n > 0 {
			settled = false
		}
	})
	return settled
}

// each calls f with every write subscription (none before Start).
func (w *Writes) each(f func(*nats.Subscription)) {
	w.mu.Lock()
	subs := w.subs
	w.mu.Unlock()
	if subs != nil {
		subs.Each(func(_ string, s *nats.Subscription) { f(s) })
	}
}

// Stop unsubscribes.
func (w *Writes) Stop() {
	w.mu.Lock()
	subs := w.subs
	w.mu.Unlock()
	if subs != nil {
		subs.Close()
	}
}

// Prefetcher starts searches for user messages (*app.App).
type Prefetcher interface {
	Prefetch(ctx context.Context, userID, text string) (started bool, err error)
}

// PrefetchUserMessages subscribes (queue group PrefetchQueue) to the
// clients' UserMessages and starts, for each, the memory search its turn
// will ask for, on work, in a span under the message's trace. For ttl (how
// long the search is kept) this replica also answers memory.search on the
// message's own subject (rpc.MemoryPrefetchedSubject) with search, so the
// turn's request reaches the replica holding the search whatever the
// number of replicas. stop unsubscribes and waits for the searches
// running; call it once (before the service that owns search stops).
func PrefetchUserMessages(work context.Context, nc *nats.Conn, p Prefetcher, search micro.HandlerFunc, ttl time.Duration, log zerolog.Logger) (stop func(), err error) {
	sem := make(chan struct{}, maxPrefetching)
	var (
		mu      sync.Mutex // stopped, routes and wg.Add: no search starts once stop waits
		stopped bool
		wg      sync.WaitGroup
		routes  = map[*nats.Subscription]*time.Timer{}
	)
	// route answers the message's own subject for ttl; false when it does
	// not. Called under mu.
	route := func(id string) bool {
		subject := rpc.MemoryPrefetchedSubject(id)
		if subject == "" || search == nil {
			return false
		}
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) { search(rpc.FromMsg(nc, m)) })
		if err != nil {
			log.Debug().Err(err).Str("subject", subject).Msg("the prefetched search of a message cannot be asked on its own subject")
			return false
		}
		routes[sub] = time.AfterFunc(ttl, func() {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := routes[sub]; ok {
				delete(routes, sub)
				_ = sub.Unsubscribe()
			}
		})
		return true
	}
	rt := bus.NewRoutes("memory-prefetch", log)
	bus.On(rt, "user_message", subjects.AllOfType(subjects.OriginClient, protocol.TypeUserMessage), func(_ context.Context, env protocol.Envelope, um *protocol.UserMessage, _ bus.Inbound) error {
		user, _ := env.Meta[app.MetaUserID].(string)
		if user == "" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return nil
		}
		select {
		case sem <- struct{}{}:
		default:
			return nil
		}
		wg.Add(1)
		routed := route(um.ID)
		ctx, span := tracer.Start(telemetry.ExtractMeta(work, env.Meta), "memory.prefetch", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("alicia.conversation_id", env.ConversationID), attribute.String("alicia.message_id", um.ID)))
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer span.End()
			if routed {
				// The subscription is on the server before the search
				// begins (one round trip, well inside the millisecond
				// before the turn asks): the turn's request finds it.
				_ = nc.FlushTimeout(time.Second)
			}
			started, err := p.Prefetch(ctx, user, um.Content)
			span.SetAttributes(attribute.Bool("alicia.memory.prefetch_started", started))
			if err != nil && !errors.Is(err, context.Canceled) {
				span.RecordError(err)
				log.Debug().Err(err).Str("conversation_id", env.ConversationID).Msg("prefetched memory search failed")
			}
		}()
		return nil
	}, bus.Queue(PrefetchQueue))
	subs, err := rt.Subscribe(work, nc)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			subs.Close()
			mu.Lock()
			stopped = true
			for s, t := range routes {
				t.Stop()
				_ = s.Unsubscribe()
			}
			clear(routes)
			mu.Unlock()
		})
		wg.Wait()
	}, nil
}

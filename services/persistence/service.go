package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// ServiceName is the nats micro service persistence registers.
const ServiceName = "alicia-persistence"

// maxInFlight bounds the requests waiting for their sequence at once; past
// it the endpoint stops taking new ones until one finishes.
const maxInFlight = 4096

// historyLimit is the most messages history.get returns (and its default).
const historyLimit = 10000

// historyReader is what history.get reads from.
type historyReader interface {
	History(ctx context.Context, cid string, limit int) ([]rpc.HistoryMessage, error)
}

// rpcServer answers history.get and persistence.applied. A request that
// waits for its sequence is handled on its own goroutine: micro runs an
// endpoint's handler on one goroutine per subscription, so a request waiting
// for a sequence far ahead would otherwise hold up every request behind it.
type rpcServer struct {
	ctx      context.Context
	nc       *nats.Conn
	st       historyReader
	progress map[string]*consume.Progress
	wait     time.Duration
	sem      chan struct{}
	wg       sync.WaitGroup
	// mu orders the handlers' wg.Add against stop's wg.Wait: micro's
	// Stop does not wait for a handler already called, so one may still
	// be starting a request when stop waits.
	mu      sync.Mutex
	stopped bool
}

// startService registers the micro service. ctx ends the waits of requests
// still in flight (they are answered 503); stop unregisters and waits for them.
func startService(ctx context.Context, nc *nats.Conn, st historyReader, progress map[string]*consume.Progress, wait time.Duration) (stop func(), err error) {
	s := &rpcServer{ctx: ctx, nc: nc, st: st, progress: progress, wait: wait, sem: make(chan struct{}, maxInFlight)}
	svc, err := micro.AddService(nc, micro.Config{Name: ServiceName, Version: "0.2.0",
		Description: "Alicia persistence: history and applied positions with read-your-writes"})
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		svc.AddEndpoint("history_get", s.async(s.history), micro.WithEndpointSubject(rpc.HistorySubject)),
		svc.AddEndpoint("applied", s.async(s.applied), micro.WithEndpointSubject(rpc.AppliedSubject)),
	)
	if err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return func() {
		_ = svc.Stop()
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.wg.Wait()
	}, nil
}

func (s *rpcServer) async(h func(micro.Request)) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			rpc.Fail(r, rpc.CodeUnavailable, "persistence is stopping")
			return
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			<-s.sem
			rpc.Fail(r, rpc.CodeUnavailable, "persistence is stopping")
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		r = rpc.Detach(s.nc, r) // answered after this handler returns
		go func() {
			defer func() { <-s.sem; s.wg.Done() }()
			h(r)
		}()
	})
}

// waitApplied waits until wait returns, bounded by the configured wait; it
// answers the error itself and reports whether the caller may go on.
func (s *rpcServer) waitApplied(ctx context.Context, r micro.Request, stream string, seq uint64, wait func(context.Context) error, applied func() uint64) bool {
	err := wait(ctx)
	switch {
	case err == nil:
		return true
	case s.ctx.Err() != nil:
		rpc.Fail(r, rpc.CodeUnavailable, "persistence is stopping")
	default:
		rpc.Fail(r, rpc.CodeTimeout, fmt.Sprintf("%s not applied up to %d within %s (applied up to %d)", stream, seq, s.wait, applied()))
	}
	return false
}

// history answers history.get: the current branch once every CONVERSATIONS
// envelope up to MinSequence is applied.
func (s *rpcServer) history(r micro.Request) {
	var req rpc.HistoryRequest
	if !rpc.Decode(r, &req) {
		return
	}
	if subjects.Validate(req.ConversationID) != nil {
		rpc.Fail(r, rpc.CodeBadRequest, "history.get wants {conversationId, minSequence?, limit?} with a valid conversationId")
		return
	}
	if req.Limit <= 0 || req.Limit > historyLimit {
		req.Limit = historyLimit
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.wait)
	defer cancel()
	// Only the conversation's partition has to be applied that far,
	// whichever instance applies it.
	p := s.progress[bus.StreamConversations]
	part := p.Of(req.ConversationID)
	if !s.waitApplied(ctx, r, bus.StreamConversations, req.MinSequence,
		func(ctx context.Context) error { return p.Wait(ctx, part, req.MinSequence) },
		func() uint64 { return p.Applied(part) }) {
		return
	}
	msgs, err := s.st.History(ctx, req.ConversationID, req.Limit)
	if err != nil {
		code := rpc.CodeInternal
		if errors.Is(err, context.DeadlineExceeded) {
			code = rpc.CodeTimeout
		}
		rpc.Fail(r, code, err.Error())
		return
	}
	if msgs == nil {
		msgs = []rpc.HistoryMessage{}
	}
	rpc.Respond(r, rpc.HistoryResponse{Messages: msgs, AppliedSequence: p.Applied(part)})
}

// applied answers persistence.applied: once the named stream is applied up
// to Sequence (every partition, whichever instance applies it), how far it
// is applied.
func (s *rpcServer) applied(r micro.Request) {
	var req rpc.AppliedRequest
	if !rpc.Decode(r, &req) {
		return
	}
	p, ok := s.progress[req.Stream]
	if !ok {
		rpc.Fail(r, rpc.CodeBadRequest, fmt.Sprintf("unknown stream %q: persistence.applied knows %s and %s",
			req.Stream, bus.StreamConversations, bus.StreamSystem))
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.wait)
	defer cancel()
	if !s.waitApplied(ctx, r, req.Stream, req.Sequence,
		func(ctx context.Context) error { return p.WaitAll(ctx, req.Sequence) }, p.AppliedAll) {
		return
	}
	rpc.Respond(r, rpc.AppliedResponse{Applied: p.AppliedAll()})
}

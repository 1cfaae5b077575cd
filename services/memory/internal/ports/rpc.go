// Package ports connects the memory service's use cases to NATS: the
// memory.search and memory.action request/reply endpoints (nats micro) and
// the durable JetStream consumers of client MemoryActions and final answers.
package ports

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory/internal/app"
)

// UseCases are what the endpoints call (*app.App).
type UseCases interface {
	Search(ctx context.Context, req rpc.MemorySearchRequest) (rpc.MemorySearchResponse, error)
	Act(ctx context.Context, userID string, act protocol.MemoryAction) (rpc.MemoryActionResponse, error)
}

// Request limits.
const (
	searchTimeout = 10 * time.Second
	actionTimeout = 20 * time.Second
	// inFlight bounds requests handled at once; micro delivers an
	// endpoint's requests one at a time, so each is handed to a goroutine.
	inFlight = 64
)

// AddService registers micro service "alicia-memory" with memory.search and
// memory.action on nc. Requests run on work and are cancelled when it ends
// (the drain's work context: svcmain.WorkContext). stop removes the service
// (no new requests) and waits for the requests in flight; call it before
// closing nc. It may be called more than once. search is the
// memory.search handler, for requests that reach this replica on other
// subjects (PrefetchUserMessages); stop waits for those too.
func AddService(work context.Context, nc *nats.Conn, uc UseCases, log zerolog.Logger) (stop func(), search micro.HandlerFunc, err error) {
	svc, err := micro.AddService(nc, micro.Config{Name: "alicia-memory", Version: "0.1.0",
		Description: "Alicia memory: semantic search and memory actions"})
	if err != nil {
		return nil, nil, err
	}
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	async := func(name string, timeout time.Duration, h func(ctx context.Context, r micro.Request)) micro.HandlerFunc {
		return func(r micro.Request) {
			sem <- struct{}{}
			wg.Add(1)
			r = rpc.Detach(nc, r) // answered after this handler returns
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				rctx, cancel := context.WithTimeout(work, timeout)
				defer cancel()
				// A child of the caller's span (the llm's turn, the gateway's request).
				rctx, span := rpc.Span(rctx, r, name)
				defer span.End()
				h(rctx, r)
			}()
		}
	}
	search = async("memory.search", searchTimeout, func(ctx context.Context, r micro.Request) {
		var req rpc.MemorySearchRequest
		if !rpc.Decode(r, &req) {
			return
		}
		resp, err := uc.Search(ctx, req)
		if err != nil {
			fail(r, err, log)
			return
		}
		rpc.Respond(r, resp)
	})
	act := async("memory.action", actionTimeout, func(ctx context.Context, r micro.Request) {
		var req rpc.MemoryActionRequest
		if !rpc.Decode(r, &req) {
			return
		}
		resp, err := uc.Act(ctx, req.UserID, req.Action)
		if err != nil {
			fail(r, err, log)
			return
		}
		rpc.Respond(r, resp)
	})
	for _, e := range []struct {
		name, subject string
		h             micro.HandlerFunc
	}{
		{"memory_search", rpc.MemorySearchSubject, search},
		{"memory_action", rpc.MemoryActionSubject, act},
	} {
		if err := svc.AddEndpoint(e.name, e.h, micro.WithEndpointSubject(e.subject)); err != nil {
			_ = svc.Stop()
			return nil, nil, err
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() { _ = svc.Stop() })
		wg.Wait()
	}, search, nil
}

// fail answers with the code err's class calls for.
func fail(r micro.Request, err error, log zerolog.Logger) {
	code := rpc.CodeInternal
	switch {
	case errors.Is(err, app.ErrInvalid):
		code = rpc.CodeBadRequest
	case errors.Is(err, app.ErrNotFound):
		code = rpc.CodeNotFound
	case errors.Is(err, app.ErrUnavailable):
		code = rpc.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = rpc.CodeTimeout
	}
	ev := log.Debug()
	switch code {
	case rpc.CodeInternal:
		ev = log.Error()
	case rpc.CodeUnavailable, rpc.CodeTimeout:
		ev = log.Warn()
	}
	ev.Err(err).Str("subject", r.Subject()).Str("code", code).Msg("request failed")
	rpc.Fail(r, code, err.Error())
}

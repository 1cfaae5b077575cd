package app

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory/internal/metrics"
	"github.com/alicia-voice/alicia/services/memory/internal/prefetch"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// Search answers memory.search: the user's pinned memories first (at most
// top-k), then up to top-k of their other memories closest to the query with
// at least the threshold's similarity. Without an embeddings backend search
// is off: Enabled false and no memories. An empty query matches nothing.
//
// With a prefetch cache, a search already made for the same request when
// the user's message was published answers it (waiting for it when still
// running) as long as nothing it depends on may have changed since
// (package prefetch); the span says which (alicia.memory.prefetch).
func (a *App) Search(ctx context.Context, req rpc.MemorySearchRequest) (rpc.MemorySearchResponse, error) {
	if a.Embedder == nil {
		return rpc.MemorySearchResponse{Memories: []rpc.Memory{}, Enabled: false}, nil
	}
	key, err := a.searchKey(req)
	if err != nil {
		return rpc.MemorySearchResponse{}, err
	}
	if key.Query == "" {
		// Nothing to match; also a cheap way to ask whether search is on.
		return rpc.MemorySearchResponse{Memories: []rpc.Memory{}, Enabled: true}, nil
	}
	var vec []float32
	if a.Prefetches != nil {
		res, outcome := a.Prefetches.Lookup(ctx, key)
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("alicia.memory.prefetch", string(outcome)),
			attribute.Bool("alicia.memory.prefetched", outcome == prefetch.Hit))
		metrics.Default().SearchPrefetch.WithLabelValues(string(outcome)).Inc()
		if outcome == prefetch.Hit {
			resp := res.Resp
			resp.Prefetched = true
			return resp, nil
		}
		if outcome == prefetch.Miss {
			a.learnShape(key)
		}
		vec = res.Vector
	}
	resp, _, err := a.search(ctx, key, vec)
	return resp, err
}

// Prefetch makes the search a turn answering a user message of userID with
// text will ask for (the service's default top-k and threshold, which the
// llm's request resolves to unless configured otherwise), and keeps it for
// that request. started is false when there is nothing to search or the
// same search is already running.
func (a *App) Prefetch(ctx context.Context, userID, text string) (started bool, err error) {
	if a.Embedder == nil || a.Prefetches == nil {
		return false, nil
	}
	key, err := a.searchKey(a.prefetchRequest(userID, text))
	if err != nil || key.Query == "" {
		return false, nil
	}
	t, ok := a.Prefetches.Begin(key)
	if !ok {
		return false, nil
	}
	resp, vec, err := a.search(ctx, key, nil)
	t.Done(prefetch.Result{Resp: resp, Vector: vec, Err: err})
	return true, err
}

// prefetchRequest is the request a turn answering a message of userID
// with text is expected to make.
func (a *App) prefetchRequest(userID, text string) rpc.MemorySearchRequest {
	req := rpc.MemorySearchRequest{UserID: userID, Query: text}
	if sh := a.shape.Load(); sh != nil {
		req.TopK, req.Threshold = sh.topK, sh.threshold
	}
	return req
}

// learnShape: a request that missed although its user and query were
// prefetched (with another top-k or threshold) is a turn's request made
// with other limits than the prefetch expected (the llm's
// ALICIA_LLM_MEMORY_TOP_K / _THRESHOLD differ from this service's
// defaults): later messages are prefetched with the request's. Requests
// with queries of their own (the memory tool's) never match a prefetched
// message, so they teach nothing.
func (a *App) learnShape(key prefetch.Key) {
	expected, err := a.searchKey(a.prefetchRequest(key.UserID, key.Query))
	if err != nil || expected == key || !a.Prefetches.Has(expected) {
		return
	}
	a.shape.Store(&searchShape{topK: key.TopK, threshold: key.Threshold})
	a.Log.Info().Int("top_k", key.TopK).Float64("threshold", key.Threshold).
		Msg("turns search memories with other limits than the defaults: prefetching with theirs")
}

// searchKey checks a request and resolves its defaults and caps.
func (a *App) searchKey(req rpc.MemorySearchRequest) (prefetch.Key, error) {
	switch {
	case req.UserID == "":
		return prefetch.Key{}, fmt.Errorf("%w: userId is empty", ErrInvalid)
	case req.Threshold < 0 || req.Threshold > 1:
		return prefetch.Key{}, fmt.Errorf("%w: threshold %g is outside 0..1", ErrInvalid, req.Threshold)
	case req.TopK < 0:
		return prefetch.Key{}, fmt.Errorf("%w: topK %d is negative", ErrInvalid, req.TopK)
	}
	topK := req.TopK
	if topK == 0 {
		topK = a.Settings.TopK
	}
	threshold := req.Threshold
	if threshold == 0 {
		threshold = a.Settings.Threshold
	}
	return prefetch.Key{UserID: req.UserID, Query: strings.TrimSpace(req.Query), TopK: min(topK, a.Settings.MaxTopK), Threshold: threshold}, nil
}

// search embeds the query (unless vec, its embedding, is given) and reads
// the memories.
func (a *App) search(ctx context.Context, key prefetch.Key, vec []float32) (rpc.MemorySearchResponse, []float32, error) {
	if vec == nil {
		vecs, err := a.embed(ctx, clip.Runes(key.Query, MaxContent))
		if err != nil {
			return rpc.MemorySearchResponse{}, nil, err
		}
		vec = vecs[0]
	}
	ms, err := a.Memories.Search(ctx, store.Query{UserID: key.UserID, Vector: vec, Pinned: key.TopK, Limit: key.TopK, Threshold: key.Threshold,
		RatingWeight: a.Settings.RatingWeight})
	if err != nil {
		return rpc.MemorySearchResponse{}, vec, storeErr(err)
	}
	return rpc.MemorySearchResponse{Memories: ms, Enabled: true, EmbeddingModel: a.Embedder.Model(), TopK: key.TopK, Threshold: key.Threshold}, vec, nil
}

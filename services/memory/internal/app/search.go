package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// Search answers memory.search: the user's pinned memories first (at most
// top-k), then up to top-k of their other memories closest to the query with
// at least the threshold's similarity. Without an embeddings backend search
// is off: Enabled false and no memories. An empty query matches nothing.
func (a *App) Search(ctx context.Context, req rpc.MemorySearchRequest) (rpc.MemorySearchResponse, error) {
	if a.Embedder == nil {
		return rpc.MemorySearchResponse{Memories: []rpc.Memory{}, Enabled: false}, nil
	}
	query := strings.TrimSpace(req.Query)
	switch {
	case req.UserID == "":
		return rpc.MemorySearchResponse{}, fmt.Errorf("%w: userId is empty", ErrInvalid)
	case req.Threshold < 0 || req.Threshold > 1:
		return rpc.MemorySearchResponse{}, fmt.Errorf("%w: threshold %g is outside 0..1", ErrInvalid, req.Threshold)
	case req.TopK < 0:
		return rpc.MemorySearchResponse{}, fmt.Errorf("%w: topK %d is negative", ErrInvalid, req.TopK)
	}
	if query == "" {
		// Nothing to match; also a cheap way to ask whether search is on.
		return rpc.MemorySearchResponse{Memories: []rpc.Memory{}, Enabled: true}, nil
	}
	topK := req.TopK
	if topK == 0 {
		topK = a.Settings.TopK
	}
	topK = min(topK, a.Settings.MaxTopK)
	threshold := req.Threshold
	if threshold == 0 {
		threshold = a.Settings.Threshold
	}
	vecs, err := a.embed(ctx, truncate(query, MaxContent))
	if err != nil {
		return rpc.MemorySearchResponse{}, err
	}
	ms, err := a.Memories.Search(ctx, store.Query{UserID: req.UserID, Vector: vecs[0], Pinned: topK, Limit: topK, Threshold: threshold})
	if err != nil {
		return rpc.MemorySearchResponse{}, storeErr(err)
	}
	return rpc.MemorySearchResponse{Memories: ms, Enabled: true}, nil
}

// truncate keeps the first n runes of s.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

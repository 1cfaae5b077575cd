package rpc

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Subjects served by the memory service (micro service "alicia-memory").
const (
	MemorySearchSubject = "memory.search"
	MemoryActionSubject = "memory.action"
)

// MemorySearchRequest finds a user's memories closest to Query.
type MemorySearchRequest struct {
	UserID string `msgpack:"userId"`
	Query  string `msgpack:"query"`
	// TopK is the most results (default and cap: the service's settings).
	TopK int `msgpack:"topK,omitempty"`
	// Threshold is the least cosine similarity (0..1); 0 = the service default.
	Threshold float64 `msgpack:"threshold,omitempty"`
}

// Memory is one memory as search and list return it.
type Memory struct {
	ID         string   `msgpack:"id" json:"id"`
	Content    string   `msgpack:"content" json:"content"`
	Tags       []string `msgpack:"tags" json:"tags"`
	Importance float64  `msgpack:"importance" json:"importance"`
	Pinned     bool     `msgpack:"pinned" json:"pinned"`
	Archived   bool     `msgpack:"archived" json:"archived"`
	// Similarity is the cosine similarity to the query (search only).
	Similarity float64 `msgpack:"similarity,omitempty" json:"similarity,omitempty"`
	CreatedAt  int64   `msgpack:"createdAt" json:"createdAt"` // ms since the epoch
	UpdatedAt  int64   `msgpack:"updatedAt" json:"updatedAt"`
	// UserRating is the person's 1..5 rating (nil: not rated).
	UserRating *int32 `msgpack:"userRating,omitempty" json:"userRating,omitempty"`
	// CreatedBy is the user who made the memory, or "extraction".
	CreatedBy string `msgpack:"createdBy,omitempty" json:"createdBy,omitempty"`
	// SourceInfo is where an extracted memory came from (alicia_memory.source_info).
	SourceInfo map[string]any `msgpack:"sourceInfo,omitempty" json:"sourceInfo,omitempty"`
	// Query is how a search found the memory, set by the caller's
	// MemorySearch/MemorySearchFor (never sent).
	Query *MemoryQuery `msgpack:"-" json:"-"`
}

// MemoryQuery is how a search ran, as a MemoryTrace records it (queryPrompt
// and queryPromptMeta).
type MemoryQuery struct {
	Text           string  // the text searched
	EmbeddingModel string  // the model of the query's embedding
	TopK           int     // the most matches asked for
	Threshold      float64 // the least similarity of a match
	Candidates     int     // how many memories the search returned
	Prefetched     bool    // answered by the search begun when the message was published
	SearchMs       float64 // the caller's wait for the answer
}

// Meta is q as MemoryTrace.queryPromptMeta.
func (q *MemoryQuery) Meta() map[string]any {
	if q == nil {
		return nil
	}
	m := map[string]any{"candidates": q.Candidates, "limit": q.TopK, "threshold": q.Threshold,
		"prefetched": q.Prefetched, "searchMs": math.Round(q.SearchMs*10) / 10}
	if q.EmbeddingModel != "" {
		m["embeddingModel"] = q.EmbeddingModel
	}
	return m
}

// MemorySearchResponse lists matches, pinned first, then by similarity.
// Enabled is false when no embeddings backend is configured (no results).
type MemorySearchResponse struct {
	Memories []Memory `msgpack:"memories"`
	Enabled  bool     `msgpack:"enabled"`
	// How the search ran: the embedding model, the top-k and threshold
	// it resolved to, and whether a prefetched search answered.
	EmbeddingModel string  `msgpack:"embeddingModel,omitempty"`
	TopK           int     `msgpack:"topK,omitempty"`
	Threshold      float64 `msgpack:"threshold,omitempty"`
	Prefetched     bool    `msgpack:"prefetched,omitempty"`
}

// annotate sets each memory's Query: how the search for req ran and how
// long the caller waited.
func (resp *MemorySearchResponse) annotate(req MemorySearchRequest, took time.Duration) {
	if len(resp.Memories) == 0 {
		return
	}
	q := &MemoryQuery{Text: req.Query, EmbeddingModel: resp.EmbeddingModel, TopK: resp.TopK, Threshold: resp.Threshold,
		Candidates: len(resp.Memories), Prefetched: resp.Prefetched, SearchMs: float64(took.Microseconds()) / 1000}
	for i := range resp.Memories {
		resp.Memories[i].Query = q
	}
}

// MemorySearch calls memory.search.
func MemorySearch(ctx context.Context, nc *nats.Conn, req MemorySearchRequest) (MemorySearchResponse, error) {
	var resp MemorySearchResponse
	start := time.Now()
	err := Call(ctx, nc, MemorySearchSubject, req, &resp)
	resp.annotate(req, time.Since(start))
	return resp, err
}

// MemoryPrefetchedPrefix: the memory replica that began the search of a
// user message when it was published answers memory.search requests for
// that message on this prefix plus the message id, while it keeps the
// search (the other replicas do not have it).
const MemoryPrefetchedPrefix = "memory.prefetched."

// MemoryPrefetchedSubject is where the search begun for user message id is
// answered; "" when id cannot be one subject token.
func MemoryPrefetchedSubject(id string) string {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, ".*> \t\r\n") {
		return ""
	}
	return MemoryPrefetchedPrefix + id
}

// MemorySearchFor calls memory.search for the turn answering user message
// msgID: the replica that began its search when the message was published
// answers (MemoryPrefetchedSubject), any replica when none does (no
// search was begun, or it has expired).
func MemorySearchFor(ctx context.Context, nc *nats.Conn, msgID string, req MemorySearchRequest) (MemorySearchResponse, error) {
	if subject := MemoryPrefetchedSubject(msgID); subject != "" {
		var resp MemorySearchResponse
		start := time.Now()
		err := callAs(ctx, nc, subject, MemorySearchSubject, req, &resp)
		if !errors.Is(err, ErrNoResponders) {
			resp.annotate(req, time.Since(start))
			return resp, err
		}
	}
	return MemorySearch(ctx, nc, req)
}

// MemoryActionRequest applies a MemoryAction for a user (the gateway's REST
// writes): the memory service embeds the content, publishes the action on
// alicia.sys.memory_action and answers once persistence has applied it.
type MemoryActionRequest struct {
	UserID string                `msgpack:"userId"`
	Action protocol.MemoryAction `msgpack:"action"`
}

// MemoryActionResponse names the memory the action applied to. Code
// CodeNotFound: the memory does not exist or belongs to another user.
type MemoryActionResponse struct {
	MemoryID string `msgpack:"memoryId"`
	Memory   Memory `msgpack:"memory"`
}

// MemoryAct calls memory.action.
func MemoryAct(ctx context.Context, nc *nats.Conn, req MemoryActionRequest) (MemoryActionResponse, error) {
	var resp MemoryActionResponse
	err := Call(ctx, nc, MemoryActionSubject, req, &resp)
	return resp, err
}

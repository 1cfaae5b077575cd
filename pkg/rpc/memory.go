package rpc

import (
	"context"

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
}

// MemorySearchResponse lists matches, pinned first, then by similarity.
// Enabled is false when no embeddings backend is configured (no results).
type MemorySearchResponse struct {
	Memories []Memory `msgpack:"memories"`
	Enabled  bool     `msgpack:"enabled"`
}

// MemorySearch calls memory.search.
func MemorySearch(ctx context.Context, nc *nats.Conn, req MemorySearchRequest) (MemorySearchResponse, error) {
	var resp MemorySearchResponse
	err := Call(ctx, nc, MemorySearchSubject, req, &resp)
	return resp, err
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

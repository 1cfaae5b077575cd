package rpc

import (
	"context"
	"errors"
	"strings"

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
		err := callAs(ctx, nc, subject, MemorySearchSubject, req, &resp)
		if !errors.Is(err, ErrNoResponders) {
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

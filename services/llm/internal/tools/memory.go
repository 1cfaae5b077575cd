package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// MemoryQueryName is the memory_query tool's name.
const MemoryQueryName = "memory_query"

// Result sizes of memory_query.
const (
	memoryDefaultLimit = 5
	memoryMaxLimit     = 20
)

// memoryQuery searches the calling user's long-term memories through the
// memory service (memory.search).
type memoryQuery struct{ nc *nats.Conn }

// NewMemoryQuery returns the memory_query tool: {query, limit?} → a list of
// {id, content, similarity, tags}.
func NewMemoryQuery(nc *nats.Conn) Tool { return memoryQuery{nc: nc} }

func (memoryQuery) Spec() Spec {
	return Spec{
		Name: MemoryQueryName,
		Description: "Search the user's long-term memory (facts, preferences and events remembered from " +
			"earlier conversations) for what is relevant to a question. Returns the closest memories, most similar first.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{
					"type":        "string",
					"description": "What to look for, in plain words, e.g. \"user's dog's name\".",
				},
				"limit": map[string]any{
					"type":        "integer",
					"minimum":     1,
					"maximum":     memoryMaxLimit,
					"description": fmt.Sprintf("Most memories to return (default %d).", memoryDefaultLimit),
				},
			},
			"required":             []any{"query"},
			"additionalProperties": false,
		},
		Source: SourceBuiltin,
	}
}

func (m memoryQuery) Call(ctx context.Context, inv Invocation, args map[string]any) (any, error) {
	query, err := stringArg(args, "query")
	if err != nil {
		return nil, err
	}
	limit, err := intArg(args, "limit", memoryDefaultLimit, 1, memoryMaxLimit)
	if err != nil {
		return nil, err
	}
	if inv.UserID == "" {
		return nil, ErrNoUser
	}
	resp, err := rpc.MemorySearch(ctx, m.nc, rpc.MemorySearchRequest{UserID: inv.UserID, Query: query, TopK: limit})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%w: %w", ErrMemoryUnavailable, ctxErr)
		}
		var re *rpc.Error
		switch {
		case errors.Is(err, rpc.ErrNoResponders):
			return nil, fmt.Errorf("%w: the memory service is not running", ErrMemoryUnavailable)
		case errors.As(err, &re):
			return nil, fmt.Errorf("%w: %s", ErrMemoryUnavailable, re.Description)
		default:
			return nil, fmt.Errorf("%w: %v", ErrMemoryUnavailable, err)
		}
	}
	if !resp.Enabled {
		return nil, ErrMemorySearchOff
	}
	out := make([]any, 0, min(len(resp.Memories), limit))
	for _, mem := range resp.Memories {
		if len(out) == limit {
			break
		}
		tags := make([]any, 0, len(mem.Tags))
		for _, t := range mem.Tags {
			tags = append(tags, t)
		}
		out = append(out, map[string]any{
			"id":         mem.ID,
			"content":    mem.Content,
			"similarity": mem.Similarity,
			"tags":       tags,
		})
	}
	return out, nil
}

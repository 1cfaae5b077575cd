package rpc

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// Subjects served by the persistence service (micro service "alicia-persistence").
const (
	HistorySubject = "history.get"
	AppliedSubject = "persistence.applied"
)

// HistoryRequest asks for a conversation's current branch once every
// CONVERSATIONS envelope up to MinSequence (e.g. the PubAck sequence of the
// caller's own publish) has been applied.
type HistoryRequest struct {
	ConversationID string `msgpack:"conversationId"`
	MinSequence    uint64 `msgpack:"minSequence,omitempty"`
	Limit          int    `msgpack:"limit,omitempty"`
}

// HistoryMessage is one message of the current branch.
type HistoryMessage struct {
	ID               string    `msgpack:"id" json:"id"`
	PreviousID       string    `msgpack:"previousId,omitempty" json:"previousId,omitempty"`
	Role             string    `msgpack:"role" json:"role"`
	Contents         string    `msgpack:"contents" json:"contents"`
	SequenceNumber   int32     `msgpack:"sequenceNumber" json:"sequenceNumber"`
	CompletionStatus string    `msgpack:"completionStatus" json:"completionStatus"`
	CreatedAt        time.Time `msgpack:"createdAt" json:"createdAt"`
}

// HistoryResponse is the reply of history.get: the branch root first.
type HistoryResponse struct {
	Messages        []HistoryMessage `msgpack:"messages"`
	AppliedSequence uint64           `msgpack:"appliedSequence"`
}

// History calls history.get.
func History(ctx context.Context, nc *nats.Conn, req HistoryRequest) (HistoryResponse, error) {
	var resp HistoryResponse
	err := Call(ctx, nc, HistorySubject, req, &resp)
	return resp, err
}

// AppliedRequest waits until persistence has applied stream (CONVERSATIONS or
// SYSTEM) up to Sequence: read-your-writes for a writer that published.
type AppliedRequest struct {
	Stream   string `msgpack:"stream"`
	Sequence uint64 `msgpack:"sequence"`
}

// AppliedResponse says how far the stream is applied (≥ the requested sequence).
type AppliedResponse struct {
	Applied uint64 `msgpack:"applied"`
}

// WaitApplied calls persistence.applied; it fails with CodeTimeout when the
// sequence is not applied within the service's wait (5 s by default).
func WaitApplied(ctx context.Context, nc *nats.Conn, stream string, seq uint64) error {
	var resp AppliedResponse
	return Call(ctx, nc, AppliedSubject, AppliedRequest{Stream: stream, Sequence: seq}, &resp)
}

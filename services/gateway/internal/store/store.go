// Package store holds the gateway's read-only Postgres queries: the views
// the REST API answers with (conversations with their current branch,
// memories, tools, MCP servers, votes, notes) and the ownership checks.
// Every session it uses is read-only; writes go through persistence.
package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store reads Postgres.
type Store struct{ pool *pgxpool.Pool }

// New returns a store on a (read-only) pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Cursor is a position in a list ordered by (Pinned, At, ID) descending.
// Clients see it only as an opaque string (Encode / DecodeCursor).
type Cursor struct {
	At     time.Time
	ID     string
	Pinned bool
}

type cursorWire struct {
	T int64  `json:"t"`
	I string `json:"i"`
	P bool   `json:"p,omitempty"`
}

// Encode returns the cursor as an opaque URL-safe string.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(cursorWire{T: c.At.UnixMicro(), I: c.ID, P: c.Pinned})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor Encode made; "" is no cursor (nil).
func DecodeCursor(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 512 {
		return nil, ErrBadCursor
	}
	var w cursorWire
	if err := json.Unmarshal(b, &w); err != nil || w.I == "" {
		return nil, ErrBadCursor
	}
	return &Cursor{At: time.UnixMicro(w.T), ID: w.I, Pinned: w.P}, nil
}

// ms is t in milliseconds since the epoch, as every API time is.
func ms(t time.Time) int64 { return t.UnixMilli() }

// owned maps an owner column to ErrNotFound / ErrForbidden for user.
func owned(err error, owner *string, user, what string) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("store: %s: %w", what, err)
	case owner == nil || *owner != user:
		return ErrForbidden
	}
	return nil
}

// ConversationOwner checks that conversation cid exists (not deleted) and
// belongs to user.
func (s *Store) ConversationOwner(ctx context.Context, user, cid string) error {
	var owner *string
	err := s.pool.QueryRow(ctx, `SELECT user_id FROM alicia_conversations
		WHERE id = $1 AND deleted_at IS NULL AND status <> 'deleted'`, cid).Scan(&owner)
	return owned(err, owner, user, "conversation owner")
}

// MessageConversation returns the conversation of message mid after checking
// that it belongs to user.
func (s *Store) MessageConversation(ctx context.Context, user, mid string) (string, error) {
	var cid string
	var owner *string
	err := s.pool.QueryRow(ctx, `SELECT c.id, c.user_id FROM alicia_messages m
		JOIN alicia_conversations c ON c.id = m.conversation_id
		WHERE m.id = $1 AND m.deleted_at IS NULL AND c.deleted_at IS NULL AND c.status <> 'deleted'`, mid).Scan(&cid, &owner)
	if err := owned(err, owner, user, "message owner"); err != nil {
		return "", err
	}
	return cid, nil
}

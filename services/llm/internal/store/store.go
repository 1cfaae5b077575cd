// Package store reads what the llm needs from PostgreSQL on a read-only
// session: messages a variation targets, a branch up to a message, and the
// siblings of a branch point. persistence is the only writer.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// Querier runs read queries; a *pgxpool.Pool fits.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Reader reads messages.
type Reader struct{ db Querier }

// New returns a Reader on db.
func New(db Querier) *Reader { return &Reader{db: db} }

// Message is one row of alicia_messages.
type Message struct {
	ID         string
	PreviousID *string
	Role       string
	Contents   string
	Status     string
	CreatedAt  time.Time
}

// Message returns message id of conversation cid (not deleted).
func (r *Reader) Message(ctx context.Context, cid, id string) (Message, error) {
	var m Message
	err := r.db.QueryRow(ctx, `SELECT id, previous_id, message_role::text, contents, completion_status::text, created_at
		FROM alicia_messages WHERE conversation_id = $1 AND id = $2 AND deleted_at IS NULL`, cid, id).
		Scan(&m.ID, &m.PreviousID, &m.Role, &m.Contents, &m.Status, &m.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("store: message: %w", err)
	}
	return m, nil
}

// Chain returns the branch that ends at message id, root first, at most
// limit messages (the most recent ones).
func (r *Reader) Chain(ctx context.Context, cid, id string, limit int) ([]rpc.HistoryMessage, error) {
	rows, err := r.db.Query(ctx, `
		WITH RECURSIVE branch AS (
			SELECT m.id, m.previous_id, m.message_role, m.contents, m.sequence_number, m.completion_status, m.created_at, 1 AS depth
			FROM alicia_messages m WHERE m.conversation_id = $1 AND m.id = $2 AND m.deleted_at IS NULL
			UNION ALL
			SELECT m.id, m.previous_id, m.message_role, m.contents, m.sequence_number, m.completion_status, m.created_at, b.depth + 1
			FROM alicia_messages m JOIN branch b ON m.id = b.previous_id AND m.conversation_id = $1
			WHERE m.deleted_at IS NULL AND b.depth < $3
		)
		SELECT id, COALESCE(previous_id, ''), message_role::text, contents, sequence_number, completion_status::text, created_at
		FROM branch ORDER BY depth DESC`, cid, id, limit)
	if err != nil {
		return nil, fmt.Errorf("store: chain: %w", err)
	}
	defer rows.Close()
	var out []rpc.HistoryMessage
	for rows.Next() {
		var m rpc.HistoryMessage
		if err := rows.Scan(&m.ID, &m.PreviousID, &m.Role, &m.Contents, &m.SequenceNumber, &m.CompletionStatus, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: chain: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: chain: %w", err)
	}
	return out, nil
}

// Siblings returns the ids of the messages that follow parent, oldest first.
func (r *Reader) Siblings(ctx context.Context, cid, parent string) ([]string, error) {
	rows, err := r.db.Query(ctx, `SELECT id FROM alicia_messages
		WHERE conversation_id = $1 AND previous_id = $2 AND deleted_at IS NULL ORDER BY created_at, id`, cid, parent)
	if err != nil {
		return nil, fmt.Errorf("store: siblings: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: siblings: %w", err)
	}
	return ids, nil
}

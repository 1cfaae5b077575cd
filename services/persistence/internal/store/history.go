package store

import (
	"context"
	"fmt"
	"time"
)

// HistoryMessage is one message of a conversation as history.get returns it.
type HistoryMessage struct {
	ID               string    `msgpack:"id" json:"id"`
	PreviousID       string    `msgpack:"previousId,omitempty" json:"previousId,omitempty"`
	Role             string    `msgpack:"role" json:"role"`
	Contents         string    `msgpack:"contents" json:"contents"`
	SequenceNumber   int32     `msgpack:"sequenceNumber" json:"sequenceNumber"`
	CompletionStatus string    `msgpack:"completionStatus" json:"completionStatus"`
	CreatedAt        time.Time `msgpack:"createdAt" json:"createdAt"`
}

// History returns the messages on the conversation's current branch, from
// the root to the branch head, oldest first.
func (s *Store) History(ctx context.Context, cid string, limit int) ([]HistoryMessage, error) {
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE branch AS (
			SELECT m.*, 1 AS depth FROM alicia_messages m
			JOIN alicia_conversations c ON c.tip_message_id = m.id
			WHERE c.id = $1 AND m.deleted_at IS NULL
			UNION ALL
			SELECT m.*, b.depth + 1 FROM alicia_messages m JOIN branch b ON m.id = b.previous_id
			WHERE m.deleted_at IS NULL AND b.depth < $2
		)
		SELECT id, COALESCE(previous_id, ''), message_role::text, contents, sequence_number, completion_status::text, created_at
		FROM branch ORDER BY depth DESC`, cid, limit)
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	defer rows.Close()
	var out []HistoryMessage
	for rows.Next() {
		var m HistoryMessage
		if err := rows.Scan(&m.ID, &m.PreviousID, &m.Role, &m.Contents, &m.SequenceNumber, &m.CompletionStatus, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

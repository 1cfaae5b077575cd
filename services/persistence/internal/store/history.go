package store

import (
	"context"
	"fmt"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// History returns the messages on the conversation's current branch, from
// the root to the branch head, oldest first.
func (s *Store) History(ctx context.Context, cid string, limit int) ([]rpc.HistoryMessage, error) {
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
	var out []rpc.HistoryMessage
	for rows.Next() {
		var m rpc.HistoryMessage
		if err := rows.Scan(&m.ID, &m.PreviousID, &m.Role, &m.Contents, &m.SequenceNumber, &m.CompletionStatus, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

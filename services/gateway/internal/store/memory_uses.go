package store

import (
	"context"
	"fmt"
	"time"
)

// MemoryUseOf is one answer that used a memory.
type MemoryUseOf struct {
	MessageID         string `json:"messageId"`
	ConversationID    string `json:"conversationId"`
	ConversationTitle string `json:"conversationTitle"`
	// Excerpt is the first ExcerptLength characters of the answer.
	Excerpt    string  `json:"excerpt"`
	Similarity float64 `json:"similarity"`
	CreatedAt  int64   `json:"createdAt"`

	id        string
	createdAt time.Time
}

// ExcerptLength bounds MemoryUseOf.Excerpt, in characters.
const ExcerptLength = 200

// ListMemoryUses selects a page of the answers that used a memory.
type ListMemoryUses struct {
	User     string
	MemoryID string
	Limit    int
	After    *Cursor
}

// MemoryUses returns a page of the answers that used memory q.MemoryID, the
// newest use first, in q.User's own conversations that are not deleted
// (the caller has checked that the memory is q.User's), and the cursor of
// the next page (nil on the last one).
func (s *Store) MemoryUses(ctx context.Context, q ListMemoryUses) ([]MemoryUseOf, *Cursor, error) {
	after := Cursor{At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if q.After != nil {
		after = *q.After
	}
	rows, err := s.pool.Query(ctx, `SELECT u.id, u.message_id, u.conversation_id, c.title, left(m.contents, $6),
			COALESCE(u.similarity_score, 0), u.created_at
		FROM alicia_memory_used u
		JOIN alicia_conversations c ON c.id = u.conversation_id
		JOIN alicia_messages m ON m.id = u.message_id AND m.conversation_id = u.conversation_id
		WHERE u.memory_id = $1 AND u.deleted_at IS NULL AND m.deleted_at IS NULL
		  AND c.user_id = $2 AND c.deleted_at IS NULL AND c.status <> 'deleted'
		  AND (u.created_at, u.id) < ($3, $4)
		ORDER BY u.created_at DESC, u.id DESC
		LIMIT $5`, q.MemoryID, q.User, after.At, after.ID, q.Limit+1, ExcerptLength)
	if err != nil {
		return nil, nil, fmt.Errorf("store: memory uses: %w", err)
	}
	defer rows.Close()
	out := []MemoryUseOf{}
	for rows.Next() {
		var u MemoryUseOf
		if err := rows.Scan(&u.id, &u.MessageID, &u.ConversationID, &u.ConversationTitle, &u.Excerpt, &u.Similarity, &u.createdAt); err != nil {
			return nil, nil, fmt.Errorf("store: memory uses: %w", err)
		}
		u.CreatedAt = ms(u.createdAt)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: memory uses: %w", err)
	}
	if len(out) <= q.Limit {
		return out, nil, nil
	}
	out = out[:q.Limit]
	last := out[len(out)-1]
	return out, &Cursor{At: last.createdAt, ID: last.id}, nil
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/restapi"
)

// Commentaries are the comments on conversation cid and on its messages,
// oldest first (a comment on the conversation has no messageId).
func (s *Store) Commentaries(ctx context.Context, cid string) ([]restapi.Commentary, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, COALESCE(message_id, ''), content, COALESCE(commentary_type, ''), COALESCE(created_by, ''), created_at
		FROM alicia_user_conversation_commentaries
		WHERE conversation_id = $1 AND deleted_at IS NULL
		ORDER BY created_at, id`, cid)
	if err != nil {
		return nil, fmt.Errorf("store: commentaries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (restapi.Commentary, error) {
		var c restapi.Commentary
		var at time.Time
		err := row.Scan(&c.ID, &c.MessageID, &c.Content, &c.CommentaryType, &c.CreatedBy, &at)
		c.CreatedAt = ms(at)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: commentaries: %w", err)
	}
	return out, nil
}

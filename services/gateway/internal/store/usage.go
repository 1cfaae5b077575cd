package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/edge"
)

// usageSQL is what one user holds and has sent today (edge.Usage):
//   - the bytes of the user's conversations not deleted (message texts,
//     their sentences' text and audio, input and output audio) and of the
//     user's memories not deleted;
//   - the input audio stored since $2 (the UTC day), deleted conversations
//     included: deleting does not give a day's audio back.
const usageSQL = `
WITH live AS (
    SELECT id FROM alicia_conversations WHERE user_id = $1 AND deleted_at IS NULL
), every AS (
    SELECT id FROM alicia_conversations WHERE user_id = $1
)
SELECT
    coalesce((SELECT sum(coalesce(octet_length(m.contents), 0))
              FROM alicia_messages m WHERE m.conversation_id IN (SELECT id FROM live) AND m.deleted_at IS NULL), 0)
  + coalesce((SELECT sum(coalesce(octet_length(s.text), 0) + coalesce(octet_length(s.audio_data), 0))
              FROM alicia_sentences s JOIN alicia_messages m ON m.id = s.message_id
              WHERE m.conversation_id IN (SELECT id FROM live) AND s.deleted_at IS NULL), 0)
  + coalesce((SELECT sum(coalesce(octet_length(a.audio_data), 0) + coalesce(octet_length(a.transcription), 0))
              FROM alicia_audio a WHERE a.conversation_id IN (SELECT id FROM live) AND a.deleted_at IS NULL), 0)
  + coalesce((SELECT sum(octet_length(content)) FROM alicia_memory WHERE user_id = $1 AND deleted_at IS NULL), 0),
    coalesce((SELECT sum(coalesce(octet_length(a.audio_data), 0))
              FROM alicia_audio a WHERE a.conversation_id IN (SELECT id FROM every)
              AND a.audio_type = 'input' AND a.created_at >= $2), 0)`

// createdSQL lists the conversations the user created since $2, deleted
// ones included, the newest first (bounded: a budget is far below).
const createdSQL = `
SELECT id, created_at FROM alicia_conversations WHERE user_id = $1 AND created_at >= $2
ORDER BY created_at DESC LIMIT 10000`

// Usage implements edge.UsageSource: what user holds, the input audio
// since day, and the conversations created since hour.
func (s *Store) Usage(ctx context.Context, user string, day, hour time.Time) (edge.Usage, error) {
	var u edge.Usage
	if err := s.pool.QueryRow(ctx, usageSQL, user, day).Scan(&u.StoredBytes, &u.AudioBytes); err != nil {
		return edge.Usage{}, fmt.Errorf("store: usage of %s: %w", user, err)
	}
	rows, err := s.pool.Query(ctx, createdSQL, user, hour)
	if err != nil {
		return edge.Usage{}, fmt.Errorf("store: conversations of %s: %w", user, err)
	}
	u.Created, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (edge.Creation, error) {
		var c edge.Creation
		return c, r.Scan(&c.ID, &c.At)
	})
	if err != nil {
		return edge.Usage{}, fmt.Errorf("store: conversations of %s: %w", user, err)
	}
	return u, nil
}

package store

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// EmbeddingDims is the size of alicia_memory.embeddings (vector(1024)).
const EmbeddingDims = 1024

// memoryAction: create/update/delete/pin/archive/rate.
//
// A rate sets user_rating (1..5) and nothing else. A create stores
// source_info as given and created_by: "extraction" for an extracted
// memory, else the acting user (envelope meta alicia.user_id).
//
// One memory may arrive twice: from the client's conversation subject
// without an embedding, and from the memory service on
// alicia.sys.memory_action with the same id and content plus the embedding.
// The two streams are applied by independent loops, so either may come
// first, and both orders must end in the same row: a create that finds the
// row already there merges into it what it carries (the embedding, never
// cleared by an absent one; source, confidence, importance, … when given),
// provided the content is the same; an update keeps the stored embedding
// only when the content did not change.
func (w *writer) memoryAction(env *protocol.Envelope, b *protocol.MemoryAction, at time.Time) (string, error) {
	userID, _ := env.Meta[MetaUserID].(string)
	id := b.ID
	if b.Memory != nil && b.Memory.ID != nil {
		id = *b.Memory.ID
	}
	switch b.Action {
	case protocol.MemoryActionActionDelete:
		w.q(`UPDATE alicia_memory SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL
			AND (user_id IS NULL OR $3 = '' OR user_id = $3)`, id, at, userID)
		return id, nil
	case protocol.MemoryActionActionArchive:
		w.q(`UPDATE alicia_memory SET archived = true WHERE id = $1 AND NOT archived
			AND (user_id IS NULL OR $2 = '' OR user_id = $2)`, id, userID)
		return id, nil
	case protocol.MemoryActionActionPin:
		// update can unpin, so a replayed pin must not win over a later update.
		w.q(`WITH ch AS (
				UPDATE alicia_memory m SET pinned = true WHERE m.id = $1 AND NOT m.pinned
				AND (m.user_id IS NULL OR $2 = '' OR m.user_id = $2)
				AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = m.id AND v.key = 'alicia.applied_seq.' || $3::text AND v.value::bigint >= $4::bigint)
				RETURNING m.id
			)
			INSERT INTO alicia_meta (id, ref, key, value)
			SELECT 'amt_seq_' || $3::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $3::text, $4::bigint::text FROM ch
			ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
			id, userID, w.stream, int64(w.seq))
		return id, nil
	case protocol.MemoryActionActionRate:
		if b.Memory == nil || b.Memory.UserRating == nil || *b.Memory.UserRating < 1 || *b.Memory.UserRating > 5 {
			return id, errRating
		}
		w.q(`UPDATE alicia_memory SET user_rating = $2 WHERE id = $1 AND deleted_at IS NULL
			AND (user_id IS NULL OR $3 = '' OR user_id = $3) AND user_rating IS DISTINCT FROM $2`, id, *b.Memory.UserRating, userID)
		return id, nil
	}
	if b.Memory == nil {
		return id, errNoMemory
	}
	m := b.Memory
	emb, info, err := embedding(m)
	if err != nil {
		return id, err
	}
	if b.Action == protocol.MemoryActionActionUpdate {
		tags := m.Tags
		if tags == nil {
			tags = []string{}
		}
		w.q(`WITH ch AS (
				UPDATE alicia_memory m SET content = $2, tags = $3, importance = COALESCE($4, m.importance), pinned = COALESCE($5, m.pinned),
					embeddings = CASE WHEN $6::vector IS NOT NULL THEN $6::vector WHEN m.content = $2 THEN m.embeddings END,
					embeddings_info = CASE WHEN $6::vector IS NOT NULL THEN $7::jsonb WHEN m.content = $2 THEN m.embeddings_info ELSE '{}' END
				WHERE m.id = $1 AND (m.user_id IS NULL OR $8 = '' OR m.user_id = $8)
				AND (m.content, m.tags, m.importance, m.pinned, m.embeddings, m.embeddings_info) IS DISTINCT FROM (
					$2, $3, COALESCE($4, m.importance), COALESCE($5, m.pinned),
					CASE WHEN $6::vector IS NOT NULL THEN $6::vector WHEN m.content = $2 THEN m.embeddings END,
					CASE WHEN $6::vector IS NOT NULL THEN $7::jsonb WHEN m.content = $2 THEN m.embeddings_info ELSE '{}' END)
				AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = m.id AND v.key = 'alicia.applied_seq.' || $9::text AND v.value::bigint >= $10::bigint)
				RETURNING m.id
			)
			INSERT INTO alicia_meta (id, ref, key, value)
			SELECT 'amt_seq_' || $9::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $9::text, $10::bigint::text FROM ch
			ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
			id, m.Content, tags, m.Importance, m.Pinned, emb, info, userID, w.stream, int64(w.seq))
		return id, nil
	}
	var tags []string // NULL: a create that merges keeps the stored tags
	if len(m.Tags) > 0 {
		tags = m.Tags
	}
	w.q(`WITH ch AS (
			INSERT INTO alicia_memory AS m (id, content, tags, importance, pinned, confidence, created_by, source_type, source_message_id,
				user_id, embeddings, embeddings_info, source_info, created_at, updated_at)
			VALUES ($1, $2, COALESCE($3::text[], '{}'), COALESCE($4, 0.5), COALESCE($5, false), COALESCE($6, 1.0),
				CASE WHEN $8::text = 'extraction' THEN 'extraction' ELSE NULLIF($7, '') END,
				COALESCE($8, 'user'), (SELECT id FROM alicia_messages WHERE id = $9::text), NULLIF($7, ''), $10::vector,
				COALESCE($11::jsonb, '{}'), COALESCE($15::jsonb, '{}'), $12, $12)
			ON CONFLICT (id) DO UPDATE SET
				tags = COALESCE($3::text[], m.tags), importance = COALESCE($4, m.importance), pinned = COALESCE($5, m.pinned),
				confidence = COALESCE($6, m.confidence), source_type = COALESCE($8, m.source_type),
				source_message_id = COALESCE(EXCLUDED.source_message_id, m.source_message_id),
				user_id = COALESCE(m.user_id, EXCLUDED.user_id),
				created_by = CASE WHEN COALESCE($8, m.source_type) = 'extraction' THEN 'extraction' ELSE COALESCE(m.created_by, EXCLUDED.created_by) END,
				embeddings = COALESCE(EXCLUDED.embeddings, m.embeddings),
				embeddings_info = CASE WHEN EXCLUDED.embeddings IS NOT NULL THEN EXCLUDED.embeddings_info ELSE m.embeddings_info END,
				source_info = COALESCE($15::jsonb, m.source_info),
				created_at = LEAST(m.created_at, EXCLUDED.created_at)
			WHERE m.content = EXCLUDED.content
			AND (m.user_id IS NULL OR EXCLUDED.user_id IS NULL OR m.user_id = EXCLUDED.user_id)
			AND (m.tags, m.importance, m.pinned, m.confidence, m.source_type, m.source_message_id, m.user_id, m.created_by,
				m.embeddings, m.embeddings_info, m.source_info, m.created_at) IS DISTINCT FROM (
				COALESCE($3::text[], m.tags), COALESCE($4, m.importance), COALESCE($5, m.pinned), COALESCE($6, m.confidence),
				COALESCE($8, m.source_type), COALESCE(EXCLUDED.source_message_id, m.source_message_id),
				COALESCE(m.user_id, EXCLUDED.user_id),
				CASE WHEN COALESCE($8, m.source_type) = 'extraction' THEN 'extraction' ELSE COALESCE(m.created_by, EXCLUDED.created_by) END,
				COALESCE(EXCLUDED.embeddings, m.embeddings),
				CASE WHEN EXCLUDED.embeddings IS NOT NULL THEN EXCLUDED.embeddings_info ELSE m.embeddings_info END,
				COALESCE($15::jsonb, m.source_info),
				LEAST(m.created_at, EXCLUDED.created_at))
			AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = m.id AND v.key = 'alicia.applied_seq.' || $13::text AND v.value::bigint >= $14::bigint)
			RETURNING m.id
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $13::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $13::text, $14::bigint::text FROM ch
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		id, m.Content, tags, m.Importance, m.Pinned, m.Confidence, userID, m.Source, m.SourceMessageID, emb, info, at,
		w.stream, int64(w.seq), sourceInfo(m))
	return id, nil
}

// sourceInfo is a memory's sourceInfo as JSON text, nil when it has none
// (a create that merges keeps the stored one).
func sourceInfo(m *protocol.MemoryActionMemory) any {
	if len(m.SourceInfo) == 0 {
		return nil
	}
	b, err := json.Marshal(m.SourceInfo)
	if err != nil {
		return nil
	}
	return string(b)
}

// embedding checks a memory's embedding and returns it as a pgvector value
// with its embeddings_info ({"model", "dims"}); both nil when there is none.
func embedding(m *protocol.MemoryActionMemory) (emb any, info any, err error) {
	if len(m.Embedding) == 0 {
		return nil, nil, nil
	}
	if len(m.Embedding) != EmbeddingDims {
		return nil, nil, fmt.Errorf("%w: %d numbers, the column holds %d", errEmbeddingSize, len(m.Embedding), EmbeddingDims)
	}
	v := make([]float32, len(m.Embedding))
	for i, x := range m.Embedding {
		f := float32(x)
		if math.IsNaN(x) || math.IsInf(float64(f), 0) {
			return nil, nil, fmt.Errorf("%w: number %d is %v", errEmbeddingValue, i, x)
		}
		v[i] = f
	}
	meta := map[string]any{"dims": len(v)}
	if m.EmbeddingModel != nil && *m.EmbeddingModel != "" {
		meta["model"] = *m.EmbeddingModel
	}
	b, _ := json.Marshal(meta)
	return pgvector.NewVector(v), string(b), nil
}

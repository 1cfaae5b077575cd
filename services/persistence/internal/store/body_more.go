package store

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// feedback: one vote per (user, target); "remove" soft-deletes it. The
// conversation's user_feedback score follows the share of up votes.
func (w *writer) feedback(cid string, env *protocol.Envelope, b *protocol.Feedback, at time.Time) string {
	userID, _ := env.Meta[MetaUserID].(string)
	if b.Vote == "remove" {
		w.q(`UPDATE alicia_votes SET deleted_at = $4 WHERE conversation_id = $1 AND target_type = $2 AND target_id = $3
			AND COALESCE(user_id, '') = $5 AND deleted_at IS NULL`, cid, string(b.TargetType), b.TargetID, at, userID)
	} else {
		w.q(`INSERT INTO alicia_votes (id, conversation_id, message_id, target_type, target_id, vote, quick_feedback, note, user_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''), $10, $10)
			ON CONFLICT ON CONSTRAINT alicia_votes_user_target_key DO UPDATE SET
				vote = EXCLUDED.vote, quick_feedback = EXCLUDED.quick_feedback, note = EXCLUDED.note, deleted_at = NULL
			WHERE (alicia_votes.vote, alicia_votes.quick_feedback, alicia_votes.note, alicia_votes.deleted_at)
				IS DISTINCT FROM (EXCLUDED.vote, EXCLUDED.quick_feedback, EXCLUDED.note, NULL::timestamptz)`,
			b.ID, cid, b.MessageID, string(b.TargetType), b.TargetID, string(b.Vote), b.QuickFeedback, b.Note, userID, at)
	}
	w.q(`UPDATE alicia_conversations c SET user_feedback = s.score FROM (
			SELECT (count(*) FILTER (WHERE vote = 'up'))::double precision / count(*) AS score
			FROM alicia_votes WHERE conversation_id = $1 AND deleted_at IS NULL AND vote IN ('up', 'down', 'critical')
			HAVING count(*) > 0) s
		WHERE c.id = $1 AND c.user_feedback IS DISTINCT FROM s.score`, cid)
	return b.ID
}

func (w *writer) note(cid string, env *protocol.Envelope, b *protocol.UserNote, at time.Time) string {
	userID, _ := env.Meta[MetaUserID].(string)
	switch b.Action {
	case "delete":
		w.q(`UPDATE alicia_notes SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`, b.ID, at)
	case "update":
		w.q(`UPDATE alicia_notes SET content = $2, category = $3 WHERE id = $1 AND (content, category::text) IS DISTINCT FROM ($2, $3)`,
			b.ID, b.Content, string(b.Category))
	default:
		w.q(`INSERT INTO alicia_notes (id, conversation_id, message_id, content, category, user_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, $7) ON CONFLICT (id) DO NOTHING`,
			b.ID, cid, b.MessageID, b.Content, string(b.Category), userID, at)
	}
	return b.ID
}

// memoryAction: create/update/delete/pin/archive. Embeddings are filled by
// the memory service through a later update envelope.
func (w *writer) memoryAction(env *protocol.Envelope, b *protocol.MemoryAction, at time.Time) (string, error) {
	userID, _ := env.Meta[MetaUserID].(string)
	id := b.ID
	if b.Memory != nil && b.Memory.ID != nil {
		id = *b.Memory.ID
	}
	switch b.Action {
	case "delete":
		w.q(`UPDATE alicia_memory SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`, id, at)
	case "pin":
		w.q(`UPDATE alicia_memory SET pinned = true WHERE id = $1 AND NOT pinned`, id)
	case "archive":
		w.q(`UPDATE alicia_memory SET archived = true WHERE id = $1 AND NOT archived`, id)
	default:
		if b.Memory == nil {
			return id, errNoMemory
		}
		m := b.Memory
		tags := m.Tags
		if tags == nil {
			tags = []string{}
		}
		if b.Action == "update" {
			w.q(`UPDATE alicia_memory SET content = $2, tags = $3, importance = COALESCE($4, importance), pinned = COALESCE($5, pinned)
				WHERE id = $1 AND (content, tags, importance, pinned) IS DISTINCT FROM ($2, $3, COALESCE($4, importance), COALESCE($5, pinned))`,
				id, m.Content, tags, m.Importance, m.Pinned)
		} else {
			w.q(`INSERT INTO alicia_memory (id, content, tags, importance, pinned, created_by, source_type, user_id, created_at, updated_at)
				VALUES ($1, $2, $3, COALESCE($4, 0.5), COALESCE($5, false), NULLIF($6, ''), 'user', NULLIF($6, ''), $7, $7)
				ON CONFLICT (id) DO NOTHING`, id, m.Content, tags, m.Importance, m.Pinned, userID, at)
		}
	}
	return id, nil
}

// transcription: the final one is stored on an input audio row. Its id is
// the user message's id (the final transcription is the user's message); the
// row links to that message now if it exists, or when it arrives.
func (w *writer) transcription(cid string, b *protocol.Transcription, at time.Time) string {
	if !b.Final {
		return b.ID
	}
	meta := map[string]any{}
	if b.Confidence != nil {
		meta["confidence"] = *b.Confidence
	}
	if b.Language != nil {
		meta["language"] = *b.Language
	}
	mj, _ := json.Marshal(meta)
	audioID := transcriptionAudioID(b.ID)
	w.q(`INSERT INTO alicia_audio (id, conversation_id, message_id, audio_type, transcription, transcription_meta, created_at, updated_at)
		VALUES ($1, $2, (SELECT id FROM alicia_messages WHERE id = $3), 'input', $4, $5, $6, $6)
		ON CONFLICT (id) DO NOTHING`, audioID, cid, b.ID, b.Text, mj, at)
	w.q(`UPDATE alicia_messages SET audio_id = $2 WHERE id = $1 AND audio_id IS NULL`, b.ID, audioID)
	return audioID
}

// transcriptionAudioID is the audio row of the final transcription of message id.
func transcriptionAudioID(messageID string) string { return derivedID("aa", messageID) }

// audioChunk records audio metadata (and bytes when present); one row per chunk sequence of a track.
func (w *writer) audioChunk(cid string, b *protocol.AudioChunk, at time.Time) string {
	id := derivedID("aa", cid, deref(b.TrackSid), strconv.Itoa(int(b.Sequence)))
	w.q(`INSERT INTO alicia_audio (id, conversation_id, audio_type, audio_format, audio_data, duration_ms, livekit_track_sid, created_at, updated_at)
		VALUES ($1, $2, 'input', $3, $4, $5, $6, $7, $7) ON CONFLICT (id) DO NOTHING`,
		id, cid, b.Format, nilIfEmpty(b.Data), b.DurationMs, b.TrackSid, at)
	return id
}

// sync stores offline messages under a server id derived from the local id,
// so a client that syncs twice creates nothing twice.
func (w *writer) sync(cid string, b *protocol.SyncRequest, at time.Time) {
	for _, m := range b.Messages {
		id := derivedID("am", cid, m.LocalID)
		w.q(`INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents,
				local_id, server_id, sync_status, synced_at, completion_status, created_at, updated_at)
			VALUES ($1, $2, (SELECT id FROM alicia_messages WHERE id = $3 OR (conversation_id = $2 AND local_id = $3) LIMIT 1),
				$4, $5::message_role, $6, $7, $1, 'synced', $8, 'completed', $8, $8)
			ON CONFLICT (id) DO NOTHING`, id, cid, deref(m.PreviousID), m.SequenceNumber, string(m.Role), m.Contents, m.LocalID, at)
	}
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

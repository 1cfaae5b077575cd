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
		w.q(`UPDATE alicia_notes SET content = $2, category = $3::note_category WHERE id = $1 AND (content, category::text) IS DISTINCT FROM ($2, $3)`,
			b.ID, b.Content, string(b.Category))
	default:
		w.q(`INSERT INTO alicia_notes (id, conversation_id, message_id, content, category, user_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, $7) ON CONFLICT (id) DO NOTHING`,
			b.ID, cid, b.MessageID, b.Content, string(b.Category), userID, at)
	}
	return b.ID
}

// transcription: the final one is stored on an input audio row. Its id is
// the user message's id (the final transcription is the user's message); the
// row links to that message now if it exists, or when it arrives. The same
// row holds the utterance's audio (AudioChunk with meta alicia.utterance_id).
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
	// The utterance's audio may have made the row first (voice.go): the
	// first final transcription fills it in.
	w.q(`INSERT INTO alicia_audio AS a (id, conversation_id, message_id, audio_type, transcription, transcription_meta, created_at, updated_at)
		VALUES ($1, $2, (SELECT id FROM alicia_messages WHERE id = $3), 'input', $4, $5, $6, $6)
		ON CONFLICT (id) DO UPDATE SET transcription = EXCLUDED.transcription, transcription_meta = EXCLUDED.transcription_meta,
			message_id = COALESCE(a.message_id, EXCLUDED.message_id)
		WHERE a.transcription IS NULL`, audioID, cid, b.ID, b.Text, mj, at)
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

// synced marks a message written offline (UserMessage.localId, published
// by the edge for a SyncRequest): local_id and synced_at; its id is the one
// derived from the local id (protocol.SyncedMessageID), so server_id is the
// row's own. Set once: a redelivery changes nothing.
func (w *writer) synced(cid string, b *protocol.UserMessage, at time.Time) {
	if b.LocalID == nil || *b.LocalID == "" {
		return
	}
	w.q(`UPDATE alicia_messages SET local_id = $2, server_id = id, sync_status = 'synced', synced_at = $3
		WHERE id = $1 AND conversation_id = $4 AND local_id IS NULL
			AND NOT EXISTS (SELECT 1 FROM alicia_messages o WHERE o.conversation_id = $4 AND o.local_id = $2)`, b.ID, *b.LocalID, at, cid)
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// conversationUpdate sets title and status; status deleted also sets
// deleted_at (kept while it stays deleted), another status clears it. The
// row records the sequence of its last change so a replay of renames and
// archive/unarchive walks through no intermediate state.
//
// A title comes from somewhere (meta alicia.title_source, 00014): the
// person's (absent: a rename, a title given at creation) always applies; a
// client's provisional placeholder only over none or another placeholder;
// a generated one (the llm's, from the content) over anything but the
// person's, counted in title_generations. An empty title is none.
func (w *writer) conversationUpdate(cid string, env *protocol.Envelope, b *protocol.ConversationUpdate, at time.Time) {
	source, _ := env.Meta[protocol.MetaTitleSource].(string)
	switch source {
	case protocol.TitleProvisional, protocol.TitleGenerated:
	default:
		source = protocol.TitlePerson
	}
	if b.Title != nil && *b.Title == "" {
		source = "none"
	}
	w.q(`WITH cur AS (
			SELECT c.id, ($2::text IS NOT NULL AND CASE $7::text
				WHEN 'generated' THEN c.title_source IN ('none', 'provisional', 'generated')
				WHEN 'provisional' THEN c.title_source IN ('none', 'provisional')
				ELSE true END) AS take
			FROM alicia_conversations c WHERE c.id = $1
		), ch AS (
			UPDATE alicia_conversations c SET title = CASE WHEN cur.take THEN $2 ELSE c.title END,
				title_source = CASE WHEN cur.take THEN $7 ELSE c.title_source END,
				title_generations = c.title_generations + CASE WHEN cur.take AND $7 = 'generated' THEN 1 ELSE 0 END,
				status = COALESCE($3::conversation_status, c.status),
				deleted_at = CASE WHEN COALESCE($3::conversation_status, c.status) = 'deleted' THEN COALESCE(c.deleted_at, $4) END
			FROM cur
			WHERE c.id = cur.id
			AND (c.title, c.title_source, c.status, c.deleted_at) IS DISTINCT FROM (CASE WHEN cur.take THEN $2 ELSE c.title END,
				CASE WHEN cur.take THEN $7 ELSE c.title_source END, COALESCE($3::conversation_status, c.status),
				CASE WHEN COALESCE($3::conversation_status, c.status) = 'deleted' THEN COALESCE(c.deleted_at, $4) END)
			AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = c.id AND v.key = 'alicia.applied_seq.' || $5::text AND v.value::bigint >= $6::bigint)
			RETURNING c.id
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $5::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $5::text, $6::bigint::text FROM ch
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		cid, b.Title, b.Status, at, w.stream, int64(w.seq), source)
}

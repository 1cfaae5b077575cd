package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// body queues the rows of one envelope body and returns the id its meta
// rows refer to ("" = the conversation).
func (w *writer) body(cid string, env *protocol.Envelope, at time.Time) (string, error) {
	switch b := env.Body.(type) {
	case *protocol.UserMessage:
		w.insertMessage(b.ID, cid, b.PreviousID, "user", b.Content, "completed", at)
		w.linkAudio(b.ID)
		return b.ID, nil
	case *protocol.AssistantMessage:
		w.insertMessage(b.ID, cid, b.PreviousID, "assistant", b.Content, "completed", at)
		return b.ID, nil
	case *protocol.StartAnswer:
		prev := b.PreviousID
		w.insertMessage(b.ID, cid, &prev, "assistant", "", "streaming", at)
		return b.ID, nil
	case *protocol.AssistantSentence:
		return w.sentence(cid, b, at), nil
	case *protocol.ToolUseRequest:
		args, err := jsonArg(b.Parameters)
		if err != nil {
			return "", err
		}
		w.q(`INSERT INTO alicia_tool_uses (id, conversation_id, message_id, tool_name, tool_arguments, status, execution, timeout_ms,
				sequence_number, created_at, updated_at)
			VALUES ($1, $2, $3, $4, COALESCE($5::jsonb, '{}'), 'pending', $6::tool_execution, $7,
			        (SELECT count(*) + 1 FROM alicia_tool_uses WHERE message_id = $3), $8, $8)
			ON CONFLICT (id) DO NOTHING`, b.ID, cid, b.MessageID, b.ToolName, args, string(b.Execution), b.TimeoutMs, at)
		return b.ID, nil
	case *protocol.ToolUseResult:
		res, err := jsonArg(b.Result)
		if err != nil {
			return "", err
		}
		status := "success"
		var code *string
		if !b.Success {
			status = "error"
			if b.ErrorCode != nil {
				c := string(*b.ErrorCode)
				code = &c
			}
		}
		w.q(`UPDATE alicia_tool_uses SET status = $2::tool_use_status, tool_result = $3, error_code = $4, error_message = $5, completed_at = $6,
			processing_duration_ms = GREATEST(0, (EXTRACT(EPOCH FROM ($6::timestamptz - created_at)) * 1000)::int)
			WHERE id = $1 AND completed_at IS NULL`, b.RequestID, status, res, code, b.ErrorMessage, at)
		return b.RequestID, nil
	case *protocol.ReasoningStep:
		w.q(`INSERT INTO alicia_reasoning_steps (id, message_id, content, sequence_number, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO NOTHING`, b.ID, b.MessageID, b.Content, b.Sequence, at)
		return b.ID, nil
	case *protocol.MemoryTrace:
		meta, _ := json.Marshal(map[string]any{"content": b.Content})
		w.q(`INSERT INTO alicia_memory_used (id, conversation_id, message_id, memory_id, similarity_score, meta,
			position_in_results, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6,
			        (SELECT count(*) + 1 FROM alicia_memory_used WHERE message_id = $3), $7, $7)
			ON CONFLICT (id) DO NOTHING`, b.ID, cid, b.MessageID, b.MemoryID, b.Relevance, meta, at)
		w.q(`UPDATE alicia_conversations SET retrieval_count = retrieval_count + 1, last_retrieved = $2
			WHERE id = $1 AND (last_retrieved IS NULL OR last_retrieved < $2)`, cid, at)
		return b.ID, nil
	case *protocol.Commentary:
		w.q(`INSERT INTO alicia_user_conversation_commentaries (id, content, conversation_id, message_id, commentary_type, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (id) DO NOTHING`,
			b.ID, b.Content, cid, b.MessageID, b.CommentaryType, at)
		return b.ID, nil
	case *protocol.Feedback:
		return w.feedback(cid, env, b, at), nil
	case *protocol.UserNote:
		return w.note(cid, env, b, at), nil
	case *protocol.MemoryAction:
		return w.memoryAction(env, b, at)
	case *protocol.Transcription:
		return w.transcription(cid, b, at), nil
	case *protocol.AudioChunk:
		return w.audioChunk(cid, b, at), nil
	case *protocol.Configuration:
		w.configuration(cid, b)
		return "", nil
	case *protocol.ControlStop:
		if b.TargetID != nil {
			w.q(`UPDATE alicia_messages SET completion_status = 'completed', interrupted_at = $2
				WHERE id = $1 AND completion_status IN ('pending', 'streaming')`, *b.TargetID, at)
			return *b.TargetID, nil
		}
		return "", nil
	case *protocol.ErrorMessage:
		if b.OriginatingID != nil {
			w.q(`UPDATE alicia_messages SET completion_status = 'failed' WHERE id = $1 AND completion_status IN ('pending', 'streaming')`, *b.OriginatingID)
		}
		return b.ID, nil
	case *protocol.BranchUpdate:
		w.q(`UPDATE alicia_conversations SET tip_message_id = $2 WHERE id = $1 AND tip_message_id IS DISTINCT FROM $2
			AND EXISTS (SELECT 1 FROM alicia_messages WHERE id = $2)`, cid, b.NewSibling.ID)
		return "", nil
	case *protocol.ConversationUpdate:
		w.q(`UPDATE alicia_conversations SET title = COALESCE($2, title), status = COALESCE($3::conversation_status, status)
			WHERE id = $1 AND (title IS DISTINCT FROM COALESCE($2, title) OR status IS DISTINCT FROM COALESCE($3::conversation_status, status))`,
			cid, b.Title, b.Status)
		return "", nil
	case *protocol.SessionStats:
		w.q(`INSERT INTO alicia_session_stats (conversation_id, message_count, tool_call_count, memories_used, session_duration_ms)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (conversation_id) DO UPDATE SET message_count = EXCLUDED.message_count, tool_call_count = EXCLUDED.tool_call_count,
			memories_used = EXCLUDED.memories_used, session_duration_ms = EXCLUDED.session_duration_ms`,
			cid, b.MessageCount, b.ToolCallCount, b.MemoriesUsed, b.SessionDurationMs)
		return "", nil
	case *protocol.SyncRequest:
		w.sync(cid, b, at)
		return "", nil
	default:
		// Acknowledgement, ControlVariation, confirmations, ServerInfo,
		// SyncResponse: kept in the stream; only stanza ids and meta are rows.
		return "", nil
	}
}

// insertMessage inserts a message chained to previous (or to the branch head
// when previous is absent) and moves the branch head to it. A redelivered
// envelope inserts nothing and moves nothing.
func (w *writer) insertMessage(id, cid string, previous *string, role, contents, status string, at time.Time) {
	w.q(`WITH prev AS (
			SELECT COALESCE($3::text, (SELECT tip_message_id FROM alicia_conversations WHERE id = $2)) AS id
		), ins AS (
			INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents,
				completion_status, sync_status, created_at, updated_at)
			SELECT $1, $2, prev.id,
				COALESCE((SELECT m.sequence_number FROM alicia_messages m WHERE m.id = prev.id), 0) + 1,
				$4::message_role, $5, $6::completion_status, 'synced', $7, $7
			FROM prev
			ON CONFLICT (id) DO NOTHING
			RETURNING id, conversation_id
		)
		UPDATE alicia_conversations c SET tip_message_id = ins.id FROM ins WHERE c.id = ins.conversation_id`,
		id, cid, previous, role, contents, status, at)
}

func (w *writer) sentence(cid string, b *protocol.AssistantSentence, at time.Time) string {
	id := deref(b.ID)
	if id == "" {
		id = derivedID("ams", cid, b.PreviousID, strconv.Itoa(int(b.Sequence)))
	}
	var audio []byte
	var size *int
	if len(b.Audio) > 0 {
		audio = b.Audio
		n := len(b.Audio)
		size = &n
	}
	w.q(`INSERT INTO alicia_sentences (id, message_id, sentence_sequence_number, text, audio_type, audio_bytesize, audio_data,
			completion_status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, CASE WHEN $6::int IS NULL THEN NULL ELSE 'output'::audio_type END, $6, $5, 'completed', $7, $7)
		ON CONFLICT DO NOTHING`, id, b.PreviousID, b.Sequence, b.Text, audio, size, at)
	w.contents[b.PreviousID] = true
	if b.IsFinal != nil && *b.IsFinal {
		w.q(`UPDATE alicia_messages SET completion_status = 'completed' WHERE id = $1 AND completion_status <> 'completed'`, b.PreviousID)
	}
	return id
}

func (w *writer) configuration(cid string, b *protocol.Configuration) {
	prefs := map[string]any{}
	if b.PreferredLanguage != nil {
		prefs["preferredLanguage"] = *b.PreferredLanguage
	}
	if b.Device != nil {
		prefs["device"] = *b.Device
	}
	if len(b.Features) > 0 {
		prefs["features"] = b.Features
	}
	if b.ClientVersion != nil {
		prefs["clientVersion"] = *b.ClientVersion
	}
	if len(prefs) == 0 {
		return
	}
	p, _ := json.Marshal(prefs)
	w.q(`UPDATE alicia_conversations SET preferences = COALESCE(preferences, '{}'::jsonb) || $2::jsonb
		WHERE id = $1 AND NOT (COALESCE(preferences, '{}'::jsonb) @> $2::jsonb)`, cid, p)
}

// derivedID gives an envelope without an id a stable one, so a redelivery maps to the same row.
func derivedID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return prefix + "_" + hex.EncodeToString(h.Sum(nil))[:20]
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// jsonArg encodes a free-form protocol value for a jsonb column.
func jsonArg(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return b, nil
}

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
	user, _ := env.Meta[MetaUserID].(string)
	w.guard(cid, user, refsOf(env)...)
	switch b := env.Body.(type) {
	case *protocol.UserMessage:
		w.addMessage(b.ID, cid, b.PreviousID, "user", b.Content, "completed", at)
		w.synced(cid, b, at)
		return b.ID, nil
	case *protocol.AssistantMessage:
		// A StartAnswer may have created the row (an answer for a client
		// that did not ask for streaming): its sentences so far are written
		// first, then the whole content replaces them.
		w.flushSentences()
		w.insertMessage(b.ID, cid, b.PreviousID, "assistant", b.Content, "completed", at)
		return b.ID, nil
	case *protocol.StartAnswer:
		prev := b.PreviousID
		w.addMessage(b.ID, cid, &prev, "assistant", "", "streaming", at)
		w.messages.promptVersions(b.ID, b.PromptVersions)
		return b.ID, nil
	case *protocol.AssistantSentence:
		return w.sentence(cid, b, at), nil
	case *protocol.ToolUseRequest:
		args, err := jsonArg(b.Parameters)
		if err != nil {
			return "", err
		}
		w.tools.request(cid, b, args, w.trace, at)
		return b.ID, nil
	case *protocol.ToolUseResult:
		res, err := jsonArg(b.Result)
		if err != nil {
			return "", err
		}
		w.tools.result(cid, b, res, at)
		return b.RequestID, nil
	case *protocol.ReasoningStep:
		w.q(`INSERT INTO alicia_reasoning_steps (id, message_id, content, sequence_number, trace_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $6, $5, $5) ON CONFLICT (id) DO NOTHING`, b.ID, b.MessageID, b.Content, b.Sequence, at, w.trace)
		return b.ID, nil
	case *protocol.MemoryTrace:
		meta, _ := json.Marshal(map[string]any{"content": b.Content})
		queryMeta := "{}"
		if len(b.QueryPromptMeta) > 0 {
			if qm, err := json.Marshal(b.QueryPromptMeta); err == nil {
				queryMeta = string(qm)
			}
		}
		w.q(`INSERT INTO alicia_memory_used (id, conversation_id, message_id, memory_id, similarity_score, meta,
			position_in_results, trace_id, query_prompt, query_prompt_meta, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6,
			        (SELECT count(*) + 1 FROM alicia_memory_used WHERE message_id = $3 AND deleted_at IS NULL), $8, $9, $10::jsonb, $7, $7)
			ON CONFLICT (id) DO NOTHING`, b.ID, cid, b.MessageID, b.MemoryID, b.Relevance, meta, at, w.trace, b.QueryPrompt, queryMeta)
		w.q(`UPDATE alicia_conversations SET retrieval_count = retrieval_count + 1, last_retrieved = $2
			WHERE id = $1 AND (last_retrieved IS NULL OR last_retrieved < $2)`, cid, at)
		return b.ID, nil
	case *protocol.Commentary:
		// A comment on the whole conversation (commentaryType
		// "conversation") names a message of it only to satisfy the
		// schema: its row has no message.
		msg := &b.MessageID
		if b.CommentaryType != nil && *b.CommentaryType == CommentaryConversation {
			msg = nil
		}
		w.q(`INSERT INTO alicia_user_conversation_commentaries (id, content, conversation_id, message_id, commentary_type, created_by, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, NULLIF($7, ''), $6, $6) ON CONFLICT (id) DO NOTHING`,
			b.ID, b.Content, cid, msg, b.CommentaryType, at, user)
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
		return w.audio(cid, env, b, at)
	case *protocol.SentenceAudio:
		return w.sentenceAudio(cid, b, at), nil
	case *protocol.SentencePlayout:
		if b.Status == protocol.SentencePlayoutStatusPlaying {
			return "", errPlaying
		}
		return w.sentencePlayout(cid, b, at), nil
	case *protocol.Configuration:
		w.configuration(cid, b)
		return "", nil
	case *protocol.ControlStop:
		w.flushSentences()
		w.flushTools() // the tool uses it cancels are written first
		if b.TargetID != nil {
			w.controlStop(*b.TargetID, b.StopType != nil && *b.StopType == protocol.ControlStopStopTypeSpeech, at)
			return *b.TargetID, nil
		}
		return "", nil
	case *protocol.ErrorMessage:
		w.flushSentences()
		w.flushTools()
		if b.OriginatingID != nil {
			w.q(`UPDATE alicia_messages SET completion_status = 'failed' WHERE id = $1 AND completion_status IN ('pending', 'streaming')`, *b.OriginatingID)
			// What the failed answer left unfinished ends with it.
			w.closeUnfinished(*b.OriginatingID, "failed")
		}
		return b.ID, nil
	case *protocol.BranchUpdate:
		if st := w.convs[cid]; st != nil {
			tip := b.NewSibling.ID
			st.tip, st.tipSeq = &tip, w.seq
		}
		return "", nil
	case *protocol.ConversationUpdate:
		w.conversationUpdate(cid, env, b, at)
		return "", nil
	case *protocol.TurnJudgement:
		return w.judgement(cid, b, at), nil
	case *protocol.SessionStats:
		// The conversation's latest session: when it began (its end, the
		// envelope's time, less its duration) and ended.
		w.q(`INSERT INTO alicia_session_stats (conversation_id, message_count, tool_call_count, memories_used, session_duration_ms,
				session_started_at, last_activity_at)
			VALUES ($1, $2, $3, $4, $5, $6::timestamptz - make_interval(secs => $5::bigint / 1000.0), $6)
			ON CONFLICT (conversation_id) DO UPDATE SET message_count = EXCLUDED.message_count, tool_call_count = EXCLUDED.tool_call_count,
			memories_used = EXCLUDED.memories_used, session_duration_ms = EXCLUDED.session_duration_ms,
			session_started_at = EXCLUDED.session_started_at, last_activity_at = EXCLUDED.last_activity_at
			WHERE alicia_session_stats.last_activity_at IS NULL OR alicia_session_stats.last_activity_at <= EXCLUDED.last_activity_at`,
			cid, b.MessageCount, b.ToolCallCount, b.MemoriesUsed, b.SessionDurationMs, at)
		return "", nil
	case *protocol.ToolRegistration:
		return w.toolRegistration(b, at)
	case *protocol.ToolSetting:
		return w.toolSetting(b), nil
	case *protocol.PromptVersion:
		return w.promptVersion(b, at)
	case *protocol.OptimizationRun:
		return w.optimizationRun(b, at)
	case *protocol.EliteOptions:
		return w.eliteOptions(b, at)
	case *protocol.DimensionPreference:
		return w.dimensionPreference(env, b, at)
	case *protocol.EliteSelect:
		return w.eliteSelect(env, b, at)
	case *protocol.LearningConsent:
		return w.learningConsent(env, b, at)
	case *protocol.UserSettings:
		return w.userSettings(env, b, at)
	case *protocol.Timer:
		return w.timer(b, at)
	case *protocol.MCPServerConfig:
		return w.mcpServerConfig(b, at)
	case *protocol.MCPServerStatus:
		return w.mcpServerStatus(b), nil
	default:
		// Acknowledgement, ControlVariation, confirmations, ServerInfo,
		// SyncRequest (its messages come as UserMessages, sync.go in
		// pkg/edge), SyncResponse: kept in the stream; only stanza ids and
		// meta are rows.
		return "", nil
	}
}

// insertMessage inserts a message chained to previous (or to the branch head
// when previous is absent), links it to the audio of its transcription when
// that came first, and makes it the branch head (written at the end of the
// batch). A redelivered envelope inserts nothing. An AssistantMessage whose
// id is a streaming answer (created by StartAnswer) completes it with the
// whole content. The row keeps the trace of the envelope that created it (a
// completing AssistantMessage fills it in only when StartAnswer had none).
func (w *writer) insertMessage(id, cid string, previous *string, role, contents, status string, at time.Time) {
	var audioID *string
	if role == "user" {
		a := transcriptionAudioID(id)
		audioID = &a
	}
	st := w.convs[cid]
	if previous == nil && st != nil {
		previous = st.tip // the head this batch moved, not yet written
	}
	// The head may be this very message (an AssistantMessage completing the
	// answer its StartAnswer made the head): then its parent stays.
	w.q(`WITH prev AS (
			SELECT CASE WHEN p.id = $1 THEN (SELECT m.previous_id FROM alicia_messages m WHERE m.id = $1) ELSE p.id END AS id
			FROM (SELECT COALESCE($3::text, (SELECT tip_message_id FROM alicia_conversations WHERE id = $2)) AS id) p
			WHERE (SELECT max(('`+ownedMarker+`' || 'message ' || m.id)::int) FROM alicia_messages m
				WHERE m.id = ANY(ARRAY[$1, $3::text]) AND m.conversation_id <> $2) IS NULL -- the ownership guard (owner.go)
		), ins AS (
			INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents,
				completion_status, sync_status, audio_id, trace_id, created_at, updated_at)
			SELECT $1, $2, prev.id,
				COALESCE((SELECT m.sequence_number FROM alicia_messages m WHERE m.id = prev.id), 0) + 1,
				$4::message_role, $5, $6::completion_status, 'synced',
				(SELECT a.id FROM alicia_audio a WHERE a.id = $8::text), $9, $7, $7
			FROM prev
			ON CONFLICT (id) DO UPDATE SET contents = EXCLUDED.contents, completion_status = 'completed',
				trace_id = COALESCE(alicia_messages.trace_id, EXCLUDED.trace_id),
				processing_duration_ms = GREATEST(0, EXTRACT(EPOCH FROM (EXCLUDED.created_at - alicia_messages.created_at)) * 1000)::int
			WHERE alicia_messages.message_role = 'assistant' AND EXCLUDED.message_role = 'assistant'
				AND alicia_messages.completion_status = 'streaming' AND EXCLUDED.completion_status = 'completed'
				AND alicia_messages.conversation_id = EXCLUDED.conversation_id
			RETURNING id, conversation_id, COALESCE(processing_duration_ms, 0) AS ms
		), total AS (
			-- The conversation's processing time grows by the answer's (once: only a streamed answer's completion has one).
			UPDATE alicia_conversations c SET total_duration_ms = c.total_duration_ms + ins.ms FROM ins
			WHERE c.id = ins.conversation_id AND ins.ms > 0 RETURNING 1
		)
		UPDATE alicia_audio a SET message_id = ins.id FROM ins WHERE a.id = $8::text AND a.message_id IS NULL`,
		id, cid, previous, role, contents, status, at, audioID, w.trace)
	if st != nil {
		st.tip, st.tipSeq = &id, w.seq
	}
}

func (w *writer) sentence(cid string, b *protocol.AssistantSentence, at time.Time) string {
	id := deref(b.ID)
	if id == "" {
		id = derivedID("ams", cid, b.PreviousID, strconv.Itoa(int(b.Sequence)))
	}
	w.sentences.add(id, cid, b, w.trace, at)
	return id
}

func (w *writer) configuration(cid string, b *protocol.Configuration) {
	st := w.convs[cid]
	if st == nil {
		return
	}
	if st.prefs == nil {
		st.prefs = map[string]any{}
	}
	st.prefsSeq = w.seq
	if b.PreferredLanguage != nil {
		st.prefs["preferredLanguage"] = *b.PreferredLanguage
	}
	if b.Voice != nil {
		st.prefs["voice"] = *b.Voice
	}
	if b.SpeechSpeed != nil {
		st.prefs["speechSpeed"] = *b.SpeechSpeed
	}
	if b.WakeWord != nil {
		st.prefs["wakeWord"] = *b.WakeWord
	}
	if b.Device != nil {
		st.prefs["device"] = *b.Device
	}
	if len(b.Features) > 0 {
		st.prefs["features"] = b.Features
	}
	if b.ClientVersion != nil {
		st.prefs["clientVersion"] = *b.ClientVersion
	}
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

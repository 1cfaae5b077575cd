package store

import (
	"fmt"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Rows of a voice turn: the audio of each synthesised sentence
// (SentenceAudio, from tts), what the room-agent played of it
// (SentencePlayout), and the input audio of a user's utterance (AudioChunk
// with meta alicia.utterance_id, from the room-agent).
//
// Both sentence envelopes name their sentence by (messageId, sequence), the
// row's UNIQUE key. In stream order the AssistantSentence comes first; should
// one of them come first all the same, it creates the row without text
// (completion_status pending) and the sentence fills it in (sentences.go).

// sentenceRowID is the id a sentence row gets when its audio or playout comes
// first: the id they name, or the one an AssistantSentence without id gets.
func sentenceRowID(cid, sentenceID, messageID string, seq int32) string {
	if sentenceID != "" {
		return sentenceID
	}
	return derivedID("ams", cid, messageID, strconv.Itoa(int(seq)))
}

// sentenceAudio stores a sentence's audio fields (and bytes when present;
// bytes already stored are kept when a repeat carries none).
func (w *writer) sentenceAudio(cid string, b *protocol.SentenceAudio, at time.Time) string {
	if w.sentences.holds(b.MessageID, b.Sequence) {
		w.flushSentences()
	}
	id := sentenceRowID(cid, b.SentenceID, b.MessageID, b.Sequence)
	w.q(`INSERT INTO alicia_sentences AS s (id, message_id, sentence_sequence_number, audio_type, audio_format, duration_ms,
			audio_bytesize, audio_data, meta, completion_status, created_at, updated_at)
		VALUES ($1, $2, $3, 'output', $4, $5, $6, $7, CASE WHEN $8::text IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('engine', $8::text) END,
			'pending', $9, $9)
		ON CONFLICT (message_id, sentence_sequence_number) DO UPDATE SET audio_type = 'output', audio_format = EXCLUDED.audio_format,
			duration_ms = EXCLUDED.duration_ms, audio_bytesize = EXCLUDED.audio_bytesize, audio_data = COALESCE(EXCLUDED.audio_data, s.audio_data),
			meta = COALESCE(s.meta, '{}') || EXCLUDED.meta
		WHERE (s.audio_type, s.audio_format, s.duration_ms, s.audio_bytesize, s.audio_data) IS DISTINCT FROM
			('output'::audio_type, EXCLUDED.audio_format, EXCLUDED.duration_ms, EXCLUDED.audio_bytesize, COALESCE(EXCLUDED.audio_data, s.audio_data))
			OR NOT COALESCE(s.meta, '{}') @> EXCLUDED.meta`,
		id, b.MessageID, b.Sequence, b.Format, b.DurationMs, b.ByteSize, nilIfEmpty(b.Data), b.Engine, at)
	return id
}

// sentencePlayout records whether a sentence was played, interrupted or
// never played, and how much of it played. The row keeps the stream sequence
// of the playout that set it (playout_seq): an older playout, replayed, does
// not overwrite a newer one, and a repeat (same status and playedMs) changes
// nothing, played_at included. A playout that cuts the answer (interrupted
// or unplayed) makes its message's contents what the user heard.
func (w *writer) sentencePlayout(cid string, b *protocol.SentencePlayout, at time.Time) string {
	if w.sentences.holds(b.MessageID, b.Sequence) {
		w.flushSentences()
	}
	id := sentenceRowID(cid, b.SentenceID, b.MessageID, b.Sequence)
	var playedAt *time.Time
	if b.Status != protocol.SentencePlayoutStatusUnplayed {
		playedAt = &at
	}
	w.q(`INSERT INTO alicia_sentences AS s (id, message_id, sentence_sequence_number, playout_status, played_ms, played_at, playout_seq,
			completion_status, created_at, updated_at)
		VALUES ($1, $2, $3, $4::playout_status, $5, $6, $7, 'pending', $8, $8)
		ON CONFLICT (message_id, sentence_sequence_number) DO UPDATE SET playout_status = EXCLUDED.playout_status,
			played_ms = EXCLUDED.played_ms, played_at = EXCLUDED.played_at, playout_seq = EXCLUDED.playout_seq
		WHERE COALESCE(s.playout_seq, 0) < EXCLUDED.playout_seq
			AND (s.playout_status, s.played_ms) IS DISTINCT FROM (EXCLUDED.playout_status, EXCLUDED.played_ms)`,
		id, b.MessageID, b.Sequence, string(b.Status), b.PlayedMs, playedAt, int64(w.seq), at)
	w.recomputeHeard([]string{b.MessageID}, false)
	return id
}

// recomputeHeard makes the contents of each cut answer among messages (one
// with a sentence interrupted or unplayed) what the user heard, and keeps the
// whole generated answer in generated_contents. Heard: the sentences played
// or interrupted (the user heard part of it), and those with no playout
// recorded that come before the cut (played, not reported); not heard: the
// unplayed ones and those with no playout after the cut (generated after the
// barge-in, never synthesised or played). With onlyCut only messages already
// cut are looked at (a flush of sentences, which cannot cut by itself).
// Repeating it changes nothing.
func (w *writer) recomputeHeard(messages []string, onlyCut bool) {
	// Every lookup goes message by message through an index (LATERAL), so
	// its cost follows the batch, not the tables: joined as sets, the
	// planner may scan all sentences for a few messages.
	w.q(`WITH msg AS (
			SELECT u.id FROM unnest($1::text[]) AS u(id)
			WHERE EXISTS (SELECT 1 FROM alicia_messages m WHERE m.id = u.id AND (NOT $2::bool OR m.generated_contents IS NOT NULL))
		), cut AS (
			SELECT msg.id AS message_id, c.at FROM msg CROSS JOIN LATERAL (
				SELECT min(s.sentence_sequence_number) AS at FROM alicia_sentences s
				WHERE s.message_id = msg.id AND s.deleted_at IS NULL AND s.playout_status IN ('interrupted', 'unplayed')) c
			WHERE c.at IS NOT NULL
		), heard AS (
			SELECT c.message_id, h.contents, h.generated FROM cut c CROSS JOIN LATERAL (
				SELECT COALESCE(string_agg(s.text, CASE WHEN left(s.text, 1) = chr(10) THEN '' ELSE ' ' END ORDER BY s.sentence_sequence_number) FILTER (WHERE s.playout_status IN ('played', 'interrupted')
						OR (s.playout_status = 'pending' AND s.sentence_sequence_number < c.at)), '') AS contents,
					COALESCE(string_agg(s.text, CASE WHEN left(s.text, 1) = chr(10) THEN '' ELSE ' ' END ORDER BY s.sentence_sequence_number), '') AS generated
				FROM alicia_sentences s WHERE s.message_id = c.message_id AND s.deleted_at IS NULL
					AND s.completion_status <> 'pending' AND s.text <> '') h
		)
		UPDATE alicia_messages m SET contents = h.contents, generated_contents = h.generated
		FROM heard h WHERE m.id = h.message_id AND (m.contents, m.generated_contents) IS DISTINCT FROM (h.contents, h.generated)`,
		messages, onlyCut)
}

// controlStop completes the answer a stop cut with what was said so far and
// records when it was cut. A barge-in (speech) also cuts an answer whose
// generation had ended: its playout was still going.
func (w *writer) controlStop(target string, speech bool, at time.Time) {
	// A stopped turn runs no more tools: those not done are cancelled (a
	// result that comes after all still records it).
	w.q(`UPDATE alicia_tool_uses SET status = 'cancelled', updated_at = $2
		WHERE message_id = $1 AND status IN ('pending', 'running') AND deleted_at IS NULL`, target, at)
	if !speech {
		w.q(`UPDATE alicia_messages SET completion_status = 'completed', interrupted_at = $2
			WHERE id = $1 AND completion_status IN ('pending', 'streaming')`, target, at)
		return
	}
	w.q(`UPDATE alicia_messages SET completion_status = 'completed', interrupted_at = COALESCE(interrupted_at, $2)
		WHERE id = $1 AND message_role = 'assistant'
			AND (completion_status IN ('pending', 'streaming') OR (completion_status = 'completed' AND interrupted_at IS NULL))`, target, at)
}

// utteranceAudio appends an AudioChunk of a user utterance to the utterance's
// input audio row, the row its final Transcription writes (in either order):
// format, track, bytes (when sent) and duration. A chunk whose sequence is
// not above the last one appended (a redelivery) adds nothing.
func (w *writer) utteranceAudio(cid, utteranceID string, b *protocol.AudioChunk, at time.Time) string {
	audioID := transcriptionAudioID(utteranceID)
	w.q(`INSERT INTO alicia_audio AS a (id, conversation_id, message_id, audio_type, audio_format, audio_data, duration_ms,
			livekit_track_sid, chunk_sequence, created_at, updated_at)
		VALUES ($1, $2, (SELECT id FROM alicia_messages WHERE id = $3), 'input', $4, $5, $6, $7, $8, $9, $9)
		ON CONFLICT (id) DO UPDATE SET audio_format = EXCLUDED.audio_format,
			audio_data = CASE WHEN EXCLUDED.audio_data IS NULL THEN a.audio_data ELSE COALESCE(a.audio_data, ''::bytea) || EXCLUDED.audio_data END,
			duration_ms = COALESCE(a.duration_ms, 0) + EXCLUDED.duration_ms,
			livekit_track_sid = COALESCE(EXCLUDED.livekit_track_sid, a.livekit_track_sid),
			chunk_sequence = EXCLUDED.chunk_sequence, message_id = COALESCE(a.message_id, EXCLUDED.message_id)
		WHERE a.chunk_sequence IS NULL OR a.chunk_sequence < EXCLUDED.chunk_sequence`,
		audioID, cid, utteranceID, b.Format, nilIfEmpty(b.Data), b.DurationMs, b.TrackSid, b.Sequence, at)
	w.q(`UPDATE alicia_messages SET audio_id = $2 WHERE id = $1 AND audio_id IS NULL`, utteranceID, audioID)
	return audioID
}

// audio maps an AudioChunk: with meta alicia.utterance_id, to its
// utterance's input audio row; without, to a row of its own per track and
// chunk sequence.
func (w *writer) audio(cid string, env *protocol.Envelope, b *protocol.AudioChunk, at time.Time) (string, error) {
	v, ok := env.Meta[edge.MetaUtteranceID]
	if !ok {
		return w.audioChunk(cid, b, at), nil
	}
	utt, _ := v.(string)
	if utt == "" {
		return "", fmt.Errorf("%w: %v", errUtteranceID, v)
	}
	return w.utteranceAudio(cid, utt, b, at), nil
}

// closeUnfinished ends what answer left unfinished when it failed: its
// sentences still pending or streaming get sentenceStatus, its tool uses
// still pending or running are cancelled.
func (w *writer) closeUnfinished(answer, sentenceStatus string) {
	w.q(`UPDATE alicia_sentences SET completion_status = $2::completion_status
		WHERE message_id = $1 AND completion_status IN ('pending', 'streaming') AND deleted_at IS NULL`, answer, sentenceStatus)
	w.q(`UPDATE alicia_tool_uses SET status = 'cancelled'
		WHERE message_id = $1 AND status IN ('pending', 'running') AND deleted_at IS NULL`, answer)
}

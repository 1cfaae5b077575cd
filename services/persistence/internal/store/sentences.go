package store

import (
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// sentenceRows accumulates AssistantSentence rows so a batch writes them
// with one multi-row statement (a pipelined statement per row costs ~50 µs
// on the server; a row of a multi-row insert ~15 µs).
type sentenceRows struct {
	ids, messages, texts []string
	seqs                 []int32
	audio                [][]byte
	traces               []*string
	at                   []time.Time
	finals               []string
	// keys are the (message, sequence) pairs accumulated: a second sentence
	// with the same pair (the same event redelivered under a new sequence)
	// is left out, as the row's UNIQUE key would leave it out.
	keys map[sentenceKey]bool
	// answers are the distinct (message, conversation) pairs of the
	// sentences, in order: what the ownership guard and the heard contents
	// look at once per message, not once per sentence.
	answers, answerConvs []string
	hasAnswers           map[[2]string]bool
}

type sentenceKey struct {
	message string
	seq     int32
}

func newSentenceRows() sentenceRows {
	return sentenceRows{keys: map[sentenceKey]bool{}, hasAnswers: map[[2]string]bool{}}
}

func (r *sentenceRows) add(id, cid string, b *protocol.AssistantSentence, trace *string, at time.Time) {
	k := sentenceKey{b.PreviousID, b.Sequence}
	if r.keys[k] {
		return
	}
	r.keys[k] = true
	if a := [2]string{b.PreviousID, cid}; !r.hasAnswers[a] {
		r.hasAnswers[a] = true
		r.answers, r.answerConvs = append(r.answers, b.PreviousID), append(r.answerConvs, cid)
	}
	r.ids = append(r.ids, id)
	r.messages = append(r.messages, b.PreviousID)
	r.seqs = append(r.seqs, b.Sequence)
	r.texts = append(r.texts, b.Text)
	r.audio = append(r.audio, nilIfEmpty(b.Audio))
	r.traces = append(r.traces, trace)
	r.at = append(r.at, at)
	if b.IsFinal != nil && *b.IsFinal {
		r.finals = append(r.finals, b.PreviousID)
	}
}

// holds reports whether the sentence (message, seq) waits in the accumulator.
func (r *sentenceRows) holds(message string, seq int32) bool {
	return r.keys[sentenceKey{message, seq}]
}

// flushSentences queues the accumulated sentences, the contents they add to
// their messages and the completion of the final ones. It runs at the end
// of a batch and before any statement whose effect depends on the sentences
// written so far (stop, error, a sentence's audio or playout), so the result
// is the one of stream order.
func (w *writer) flushSentences() {
	r := &w.sentences
	if len(r.ids) == 0 {
		return
	}
	w.guardSentences(r)
	// Contents grow by the sentences this statement actually inserted, so a
	// redelivered sentence adds nothing (stream order is sentence order); the
	// final one completes the message in the same row update. A row the
	// sentence's audio or playout created first (pending, no text; see
	// voice.go) gets its text and its trace now and counts as inserted.
	w.q(`WITH ins AS (
			INSERT INTO alicia_sentences AS s (id, message_id, sentence_sequence_number, text, audio_type, audio_bytesize, audio_data,
				completion_status, trace_id, created_at, updated_at)
			SELECT id, m, s, t, CASE WHEN a IS NULL THEN NULL ELSE 'output'::audio_type END, length(a), a, 'completed', tr, at, at
			FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::bytea[], $6::timestamptz[], $8::text[]) AS x(id, m, s, t, a, at, tr)
			ON CONFLICT (message_id, sentence_sequence_number) DO UPDATE SET id = EXCLUDED.id, text = EXCLUDED.text,
				completion_status = 'completed', created_at = EXCLUDED.created_at, trace_id = EXCLUDED.trace_id,
				audio_type = COALESCE(s.audio_type, EXCLUDED.audio_type), audio_bytesize = COALESCE(s.audio_bytesize, EXCLUDED.audio_bytesize),
				audio_data = COALESCE(s.audio_data, EXCLUDED.audio_data)
			WHERE s.completion_status = 'pending'
			RETURNING message_id, sentence_sequence_number, text, created_at
		), added AS (
			SELECT message_id, string_agg(text, CASE WHEN left(text, 1) = chr(10) THEN '' ELSE ' ' END ORDER BY sentence_sequence_number) AS text,
				max(created_at) AS last_at
			FROM ins GROUP BY message_id
		), fin AS (
			-- The answers their final sentence completes now (the rows as they were
			-- before this statement), with how long they took.
			SELECT m.id, m.conversation_id, GREATEST(0, EXTRACT(EPOCH FROM (added.last_at - m.created_at)) * 1000)::int AS ms
			FROM alicia_messages m JOIN added ON added.message_id = m.id
			WHERE m.id = ANY($7::text[]) AND m.completion_status IN ('pending', 'streaming')
		), upd AS (
			UPDATE alicia_messages m SET
				contents = CASE WHEN m.contents = '' THEN added.text
					WHEN left(added.text, 1) = chr(10) THEN m.contents || added.text ELSE m.contents || ' ' || added.text END,
				completion_status = CASE WHEN fin.id IS NOT NULL THEN 'completed' ELSE m.completion_status END,
				processing_duration_ms = COALESCE(fin.ms, m.processing_duration_ms)
			FROM added LEFT JOIN fin ON fin.id = added.message_id WHERE m.id = added.message_id
			RETURNING 1
		)
		-- The conversation's processing time grows by each answer completed.
		UPDATE alicia_conversations c SET total_duration_ms = c.total_duration_ms + t.ms
		FROM (SELECT conversation_id, sum(ms) AS ms FROM fin GROUP BY conversation_id) t WHERE c.id = t.conversation_id`,
		r.ids, r.messages, r.seqs, r.texts, r.audio, r.at, r.finals, r.traces)
	// A sentence that comes after a barge-in cut its answer was not heard:
	// the contents of a cut answer are worked out again from its sentences.
	w.recomputeHeard(r.answers, true)
	*r = newSentenceRows()
}

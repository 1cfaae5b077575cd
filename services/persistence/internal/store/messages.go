package store

import (
	"strings"
	"time"
)

// messageRows accumulates the messages a UserMessage or a StartAnswer
// creates, so consecutive ones are written with one multi-row statement (a
// statement per message costs ~135 µs on the server, most of it the
// statement itself, not the row). A message may chain to one accumulated
// before it: its sequence number follows its parent's, worked out in the
// statement. The rows are written before any other statement of the batch
// is queued (writer.q), so every statement still sees the effects of the
// envelopes before it, in stream order.
type messageRows struct {
	ids, convs, roles, contents, statuses []string
	// prevs are the parents given by the envelope or the branch head the
	// batch moved (nil: the conversation's head in the database).
	prevs []*string
	// parents are the 1-based positions of the parents among the rows (0:
	// a parent in the database, or none).
	parents []int32
	at      []time.Time
	audio   []*string
	traces  []*string
	// pvs are the prompt versions that shaped an answer, joined by spaces
	// ("" for none: the column stays NULL).
	pvs []string
	// index maps an accumulated id to its 1-based position.
	index map[string]int32
}

func (r *messageRows) reset() { *r = messageRows{index: map[string]int32{}} }

// promptVersions records the prompt versions of accumulated message id
// (StartAnswer.promptVersions).
func (r *messageRows) promptVersions(id string, pvs []string) {
	if i, ok := r.index[id]; ok && len(pvs) > 0 {
		r.pvs[i-1] = strings.Join(pvs, " ")
	}
}

// addMessage queues a message for the multi-row insert (see insertMessage
// for what the row is). An id already accumulated, or a parent accumulated
// for another conversation, first writes what was accumulated, so the
// statement's ON CONFLICT and ownership check see it as the one-row
// statement did.
func (w *writer) addMessage(id, cid string, previous *string, role, contents, status string, at time.Time) {
	r := &w.messages
	if r.index == nil {
		r.reset()
	}
	st := w.convs[cid]
	if previous == nil && st != nil {
		previous = st.tip // the head this batch moved, not yet written
	}
	if _, dup := r.index[id]; dup {
		w.flushMessages()
	} else if previous != nil {
		if p, ok := r.index[*previous]; ok && r.convs[p-1] != cid {
			w.flushMessages()
		}
	}
	var parent int32
	if previous != nil {
		parent = r.index[*previous]
	}
	var audioID *string
	if role == "user" {
		a := transcriptionAudioID(id)
		audioID = &a
	}
	r.ids = append(r.ids, id)
	r.convs = append(r.convs, cid)
	r.roles = append(r.roles, role)
	r.contents = append(r.contents, contents)
	r.statuses = append(r.statuses, status)
	r.prevs = append(r.prevs, previous)
	r.parents = append(r.parents, parent)
	r.at = append(r.at, at)
	r.audio = append(r.audio, audioID)
	r.traces = append(r.traces, w.trace)
	r.pvs = append(r.pvs, "")
	r.index[id] = int32(len(r.ids))
	if st != nil {
		st.tip, st.tipSeq = &id, w.seq
	}
}

// flushMessages queues the accumulated messages: first the ownership check
// (neither a message's id nor its parent may be another conversation's),
// then one insert. A message whose id exists is left as it is (a
// redelivery); its sequence number is the stored one for the messages
// chained to it. The others take their parent's sequence number + 1. Rows
// are inserted in stream order and linked to their transcription's audio
// when that came first.
func (w *writer) flushMessages() {
	r := &w.messages
	if len(r.ids) == 0 {
		return
	}
	// Looked up id by id (an index lookup each, whatever the planner
	// guesses of the arrays' size).
	w.b.Queue(`SELECT ('`+ownedMarker+`' || 'message ' || y.id)::int
		FROM unnest($1::text[], $2::text[], $3::text[]) AS x(id, c, p) CROSS JOIN LATERAL (VALUES (x.id), (x.p)) AS y(id)
		WHERE EXISTS (SELECT 1 FROM alicia_messages m WHERE m.id = y.id AND m.conversation_id <> x.c)`, r.ids, r.convs, r.prevs)
	w.b.Queue(`WITH RECURSIVE x AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[],
				$8::timestamptz[], $9::text[], $10::text[], $11::text[]) WITH ORDINALITY AS x(id, c, p, par, role, contents, status, at, audio, tr, pv, ord)
		), r AS (
			-- The head may be this very message (a redelivery): its parent stays.
			SELECT x.*, CASE WHEN h.id = x.id THEN (SELECT m.previous_id FROM alicia_messages m WHERE m.id = x.id) ELSE h.id END AS prev
			FROM x CROSS JOIN LATERAL (SELECT CASE WHEN x.par > 0 OR x.p IS NOT NULL THEN x.p
				ELSE (SELECT c.tip_message_id FROM alicia_conversations c WHERE c.id = x.c) END AS id) h
		), s AS (
			-- Stored rows are looked up one by one (scalar subqueries: an
			-- index lookup each, however big the table).
			SELECT r.ord, COALESCE((SELECT e.sequence_number FROM alicia_messages e WHERE e.id = r.id),
				COALESCE((SELECT m.sequence_number FROM alicia_messages m WHERE m.id = r.prev), 0) + 1) AS seq
			FROM r WHERE r.par = 0
			UNION ALL
			SELECT r.ord, COALESCE((SELECT e.sequence_number FROM alicia_messages e WHERE e.id = r.id), s.seq + 1)
			FROM s JOIN r ON r.par = s.ord
		), ins AS (
			INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents,
				completion_status, sync_status, audio_id, trace_id, prompt_versions, created_at, updated_at)
			SELECT r.id, r.c, r.prev, s.seq, r.role::message_role, r.contents, r.status::completion_status, 'synced',
				(SELECT a.id FROM alicia_audio a WHERE a.id = r.audio), r.tr, string_to_array(NULLIF(r.pv, ''), ' '), r.at, r.at
			FROM r JOIN s ON s.ord = r.ord ORDER BY r.ord
			ON CONFLICT (id) DO NOTHING
			RETURNING id, audio_id
		)
		UPDATE alicia_audio a SET message_id = ins.id FROM ins WHERE a.id = ins.audio_id AND a.message_id IS NULL`,
		r.ids, r.convs, r.prevs, r.parents, r.roles, r.contents, r.statuses, r.at, r.audio, r.traces, r.pvs)
	r.reset()
}

package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Ownership. The subject binds an envelope to its conversation, and the ids
// in its body must belong to that conversation too (a memory or a note also
// to the conversation's user): a client that learnt the id of another
// user's message must not append to it, vote on it, stop it or show that
// user's memory in its own conversation. Each envelope that names rows is
// preceded in the batch by one guard statement; a named row that exists but
// belongs elsewhere makes the statement fail with a message persistence
// recognises (ownedMarker), so the batch is re-applied one envelope at a
// time and only that envelope is dead-lettered, with the reason. A row that
// does not exist yet is not the guard's business (the foreign keys are).
// Sentences and tool uses, written set-based at the end of a batch, are
// guarded set-based too (guardSentences, guardTools).

// ownedMarker starts the text a guard fails with. Plain SQL cannot raise an
// error, so the guard casts the text to int: Postgres reports it as
// `invalid input syntax for type integer: "<text>"` (22P02), with no extra
// round trip and no function to install.
const ownedMarker = "alicia-not-owned: "

// ref kinds a guard checks.
const (
	refMessage    = "message"
	refSentence   = "sentence"
	refToolUse    = "tool use"
	refNote       = "note"
	refMemory     = "memory"
	refAudio      = "audio"
	refReasoning  = "reasoning step"
	refMemoryUse  = "memory use"
	refCommentary = "commentary"
)

type ref struct{ kind, id string }

// guard queues the ownership check of refs (empty ids are left out) for an
// envelope of conversation cid sent by user ("" when the envelope has none).
func (w *writer) guard(cid, user string, refs ...ref) {
	kinds := make([]string, 0, len(refs))
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		if r.id != "" {
			kinds, ids = append(kinds, r.kind), append(ids, r.id)
		}
	}
	if len(ids) == 0 || cid == "" {
		return
	}
	w.q(guardSQL, kinds, ids, cid, user)
}

// guardSQL: $1 kinds, $2 ids, $3 the conversation, $4 the envelope's user.
// A memory belongs to the conversation's owner (and to the envelope's user
// when it names one); a note to the conversation and to its writer.
const guardSQL = `SELECT ('` + ownedMarker + `' || x.k || ' ' || x.id)::int
	FROM unnest($1::text[], $2::text[]) AS x(k, id)
	WHERE CASE x.k
		WHEN 'message' THEN EXISTS (SELECT 1 FROM alicia_messages r WHERE r.id = x.id AND r.conversation_id <> $3)
		WHEN 'sentence' THEN EXISTS (SELECT 1 FROM alicia_sentences r JOIN alicia_messages m ON m.id = r.message_id
			WHERE r.id = x.id AND m.conversation_id <> $3)
		WHEN 'tool use' THEN EXISTS (SELECT 1 FROM alicia_tool_uses r WHERE r.id = x.id AND r.conversation_id <> $3)
		WHEN 'note' THEN EXISTS (SELECT 1 FROM alicia_notes r WHERE r.id = x.id
			AND (r.conversation_id <> $3 OR ($4::text <> '' AND r.user_id IS DISTINCT FROM $4::text)))
		WHEN 'memory' THEN EXISTS (SELECT 1 FROM alicia_memory r WHERE r.id = x.id
			AND (r.user_id IS DISTINCT FROM (SELECT c.user_id FROM alicia_conversations c WHERE c.id = $3)
				OR ($4::text <> '' AND r.user_id IS DISTINCT FROM $4::text)))
		WHEN 'audio' THEN EXISTS (SELECT 1 FROM alicia_audio r WHERE r.id = x.id AND r.conversation_id IS DISTINCT FROM $3)
		WHEN 'reasoning step' THEN EXISTS (SELECT 1 FROM alicia_reasoning_steps r JOIN alicia_messages m ON m.id = r.message_id
			WHERE r.id = x.id AND m.conversation_id <> $3)
		WHEN 'memory use' THEN EXISTS (SELECT 1 FROM alicia_memory_used r WHERE r.id = x.id AND r.conversation_id <> $3)
		WHEN 'commentary' THEN EXISTS (SELECT 1 FROM alicia_user_conversation_commentaries r WHERE r.id = x.id AND r.conversation_id <> $3)
		ELSE false END`

// guardSentences queues the check that every accumulated sentence's message
// belongs to the sentence's conversation.
func (w *writer) guardSentences(r *sentenceRows) {
	// A sentence id of another message fails on its primary key; the
	// message is looked up by a correlated subquery, an index lookup per
	// row whatever the planner thinks of the unnest's size.
	w.q(`SELECT ('`+ownedMarker+`' || 'message ' || x.m)::int
		FROM unnest($1::text[], $2::text[]) AS x(m, c)
		WHERE (SELECT m.conversation_id FROM alicia_messages m WHERE m.id = x.m) <> x.c`, r.answers, r.answerConvs)
}

// guardTools queues the check that the accumulated requests' messages and
// ids, and the results' requests, belong to their envelopes' conversations.
// It runs after the requests are written, so a result naming a request of
// another conversation in the same batch is caught too.
func (w *writer) guardTools(ids, convs []string, kind string) {
	if len(ids) == 0 {
		return
	}
	w.q(`SELECT ('`+ownedMarker+`' || $3::text || ' ' || x.id)::int FROM unnest($1::text[], $2::text[]) AS x(id, c)
		WHERE CASE $3::text
			WHEN 'message' THEN EXISTS (SELECT 1 FROM alicia_messages r WHERE r.id = x.id AND r.conversation_id <> x.c)
			ELSE EXISTS (SELECT 1 FROM alicia_tool_uses r WHERE r.id = x.id AND r.conversation_id <> x.c) END`, ids, convs, kind)
}

// notOwned recognises a guard's failure and says what was named.
func notOwned(err error) (string, bool) { return markedFailure(err, ownedMarker) }

// markedFailure recognises a statement that failed on purpose by casting
// marker + text to int (Postgres reports `invalid input syntax for type
// integer: "<marker><text>"`, 22P02) and returns the text.
func markedFailure(err error, marker string) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22P02" {
		return "", false
	}
	i := strings.Index(pgErr.Message, marker)
	if i < 0 {
		return "", false
	}
	return strings.TrimSuffix(pgErr.Message[i+len(marker):], `"`), true
}

var errNotOwned = errors.New("the envelope names a row of another conversation or user")

func notOwnedError(what string) error { return fmt.Errorf("%w: %s", errNotOwned, what) }

// refsOf lists the rows an envelope's body names that must be its
// conversation's (or, for memories and notes, its user's). Sentences and
// tool uses are guarded when they are flushed, messages by insertMessage's
// own statement.
func refsOf(env *protocol.Envelope) []ref {
	switch b := env.Body.(type) {
	case *protocol.ReasoningStep:
		return []ref{{refMessage, b.MessageID}, {refReasoning, b.ID}}
	case *protocol.MemoryTrace:
		return []ref{{refMessage, b.MessageID}, {refMemory, b.MemoryID}, {refMemoryUse, b.ID}}
	case *protocol.Commentary:
		return []ref{{refMessage, b.MessageID}, {refCommentary, b.ID}}
	case *protocol.Feedback:
		return []ref{{refMessage, b.MessageID}, {feedbackTargets[b.TargetType], b.TargetID}}
	case *protocol.UserNote:
		return []ref{{refNote, b.ID}, {refMessage, b.MessageID}}
	case *protocol.MemoryAction:
		id := b.ID
		var source string
		if b.Memory != nil {
			if b.Memory.ID != nil {
				id = *b.Memory.ID
			}
			source = deref(b.Memory.SourceMessageID)
		}
		return []ref{{refMemory, id}, {refMessage, source}}
	case *protocol.Transcription:
		return []ref{{refMessage, b.ID}, {refAudio, transcriptionAudioID(b.ID)}}
	case *protocol.AudioChunk:
		if utt, _ := env.Meta[edge.MetaUtteranceID].(string); utt != "" {
			return []ref{{refMessage, utt}, {refAudio, transcriptionAudioID(utt)}}
		}
	case *protocol.SentenceAudio:
		return []ref{{refMessage, b.MessageID}, {refSentence, b.SentenceID}}
	case *protocol.SentencePlayout:
		return []ref{{refMessage, b.MessageID}, {refSentence, b.SentenceID}}
	case *protocol.ControlStop:
		return []ref{{refMessage, deref(b.TargetID)}}
	case *protocol.TurnJudgement:
		return []ref{{refMessage, b.MessageID}}
	case *protocol.ErrorMessage:
		return []ref{{refMessage, deref(b.OriginatingID)}}
	case *protocol.BranchUpdate:
		return []ref{{refMessage, b.ParentMessageID}, {refMessage, b.NewSibling.ID}}
	case *protocol.SyncRequest:
		refs := make([]ref, 0, len(b.Messages))
		for _, m := range b.Messages {
			refs = append(refs, ref{refMessage, deref(m.PreviousID)})
		}
		return refs
	}
	return nil
}

var feedbackTargets = map[protocol.FeedbackTargetType]string{
	protocol.FeedbackTargetTypeMessage:     refMessage,
	protocol.FeedbackTargetTypeSentence:    refSentence,
	protocol.FeedbackTargetTypeToolUse:     refToolUse,
	protocol.FeedbackTargetTypeMemory:      refMemory,
	protocol.FeedbackTargetTypeReasoning:   refReasoning,
	protocol.FeedbackTargetTypeMemoryUsage: refMemoryUse,
}

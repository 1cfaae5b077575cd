// Package timeline turns a conversation's envelopes, as stored in the
// CONVERSATIONS stream, into the steps of its timeline: when each was
// stored (offset from the conversation's first envelope, gap from the one
// before), who produced it (the subject's origin), its type, a one-line
// summary, and the ids that link it to the message it is about. `alicia
// replay` prints the steps; the gateway serves them to the web client
// (GET /v1/conversations/{id}/timeline), which draws each answer's latency
// waterfall from the link fields.
package timeline

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Step is one envelope of the timeline, as GET
// /v1/conversations/{id}/timeline answers it (restapi.Step, generated from
// the REST contract). The link fields are set where the envelope names
// them, and are absent otherwise: MessageID is the message the envelope is
// about (the user message of a Transcription, UserMessage or input
// AudioChunk, its utterance; the answer of a StartAnswer, AssistantMessage,
// AssistantSentence, SentenceAudio, SentencePlayout, ToolUseRequest,
// ReasoningStep or MemoryTrace); ReplyTo the message an answer answers
// (StartAnswer, AssistantMessage); Sentence a sentence's 1-based sequence
// (AssistantSentence, SentenceAudio, SentencePlayout); Final
// Transcription.final or AssistantSentence.isFinal (when set); Status a
// SentencePlayout's (played, interrupted, unplayed).
type Step = restapi.Step

// Timeline makes the steps of one conversation, in stream order. The zero
// value starts at the first step it is given; Anchor starts it later.
type Timeline struct {
	// Envelopes puts each decoded envelope, as JSON, in its step (audio
	// bytes included: `alicia replay --json`).
	Envelopes bool

	first, prev time.Time
}

// Anchor places the steps that follow after the conversation's start:
// first is the time of its first envelope, prev that of the envelope just
// before the next step (zero when not known: that step's gap is 0).
func (t *Timeline) Anchor(first, prev time.Time) {
	t.first, t.prev = first, prev
}

// Step makes the step of one stored message: its stream sequence, subject,
// stream time and data. An envelope that does not decode is a step of
// type "invalid" with the error.
func (t *Timeline) Step(seq uint64, subject string, at time.Time, data []byte) Step {
	if t.first.IsZero() {
		t.first = at
	}
	if t.prev.IsZero() {
		t.prev = at
	}
	st := Step{Sequence: seq, Time: at, TimeMs: at.UnixMilli(),
		OffsetMs: at.Sub(t.first).Milliseconds(), GapMs: at.Sub(t.prev).Milliseconds()}
	t.prev = at
	if ps, err := subjects.Parse(subject); err == nil {
		st.Origin = string(ps.Origin)
	}
	env, err := protocol.Decode(data)
	if err != nil {
		st.Type, st.Error = "invalid", err.Error()
		return st
	}
	st.Type, st.Summary = env.Type.String(), summarize(env)
	st.StanzaID = env.StanzaID
	if st.Origin == string(subjects.OriginServer) {
		st.StanzaID, _ = bus.ServerStanzaID(seq)
	}
	link(&st, env)
	if t.Envelopes {
		st.Envelope, _ = protocol.EncodeJSON(env)
	}
	return st
}

// link sets the step's link fields from the envelope.
func link(st *Step, env protocol.Envelope) {
	switch b := env.Body.(type) {
	case *protocol.Transcription:
		final := b.Final
		st.MessageID, st.Final = b.ID, &final
	case *protocol.UserMessage:
		st.MessageID = b.ID
	case *protocol.AudioChunk:
		st.MessageID, _ = env.Meta[edge.MetaUtteranceID].(string)
	case *protocol.StartAnswer:
		st.MessageID, st.ReplyTo = b.ID, b.PreviousID
	case *protocol.AssistantMessage:
		st.MessageID = b.ID
		if b.PreviousID != nil {
			st.ReplyTo = *b.PreviousID
		}
	case *protocol.AssistantSentence:
		st.MessageID, st.Sentence = b.PreviousID, b.Sequence
		if b.IsFinal != nil {
			final := *b.IsFinal
			st.Final = &final
		}
	case *protocol.SentenceAudio:
		st.MessageID, st.Sentence = b.MessageID, b.Sequence
	case *protocol.SentencePlayout:
		st.MessageID, st.Sentence, st.Status = b.MessageID, b.Sequence, string(b.Status)
	case *protocol.ToolUseRequest:
		st.MessageID = b.MessageID
	case *protocol.ReasoningStep:
		st.MessageID = b.MessageID
	case *protocol.MemoryTrace:
		st.MessageID = b.MessageID
	case *protocol.TurnEvent:
		// A cancelled preemptive answer belongs to the utterance it was
		// started on; a false interruption to the answer that resumed.
		switch {
		case b.MessageID != nil:
			st.MessageID = *b.MessageID
		case b.UtteranceID != nil:
			st.MessageID = *b.UtteranceID
		}
	}
}

package agent

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Span bookkeeping of the voice turn: voice.turn from the end of the
// user's speech to the answer's first frame, and a voice.playout span per
// sentence played.

// playout is the voice.playout span of the sentence being played: one per
// sentence, from its first frame to its last (or to the cut), parented on
// the span that synthesised its audio. A sentence paused by a barge-in and
// played again from its start keeps its span.
type playout struct {
	span     trace.Span
	turn     string
	sentence string
}

// voiceTurnSpan records the voice.turn span: from the end of the user's
// speech to the answer's first frame, under the voice.end_of_speech span
// that started the turn's trace, linked to the span that made the audio
// heard first.
func (t *tracker) voiceTurnSpan(ev PlayEvent, userMsg string, end speechEnd, audioSpan trace.SpanContext, transcribed time.Duration, haveTranscript bool) {
	v2v := ev.At.Sub(end.at)
	opts := []trace.SpanStartOption{trace.WithTimestamp(end.at)}
	if audioSpan.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: audioSpan}))
	}
	_, span := tracer.Start(withParent(end.span), "voice.turn", opts...)
	span.SetAttributes(attribute.String("alicia.conversation_id", t.r.cid), attribute.String("alicia.message_id", ev.Turn),
		attribute.String("alicia.user_message_id", userMsg), attribute.Int64("alicia.voice_to_voice_us", v2v.Microseconds()))
	if haveTranscript {
		span.SetAttributes(attribute.Int64("alicia.speech_end_to_transcript_us", transcribed.Microseconds()))
	}
	span.End(trace.WithTimestamp(ev.At))
}

// playoutUnfinished is the playout status of a voice.playout span whose
// sentence never reached its last frame nor was cut by a barge-in: the
// room closed, or the player went on without it.
const playoutUnfinished protocol.SentencePlayoutStatus = "unfinished"

// withParent is a context whose span is sc (none when invalid: a root).
func withParent(sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// sentenceAudio notes the span context a sentence's audio came with (the
// tts's span that synthesised it), once per sentence: its first chunk.
func (t *tracker) sentenceAudio(sentenceID string, sc trace.SpanContext) {
	t.mu.Lock()
	if len(t.audioSpans) >= 256 { // sentences whose audio never played
		clear(t.audioSpans)
	}
	t.audioSpans[sentenceID] = sc
	t.mu.Unlock()
}

// startPlayout opens the voice.playout span of the sentence whose first
// frame just went out. The same sentence again (played from its start
// after a false interruption) keeps its span, with an event.
func (t *tracker) startPlayout(ev PlayEvent) {
	t.mu.Lock()
	prev := t.playing
	if prev != nil && prev.turn == ev.Turn && prev.sentence == ev.Sentence {
		t.mu.Unlock()
		prev.span.AddEvent("playout.restarted", trace.WithTimestamp(ev.At))
		return
	}
	t.playing = nil
	tu := t.turnLocked(ev.Turn)
	parent, ok := t.audioSpans[ev.Sentence]
	if ok {
		delete(t.audioSpans, ev.Sentence)
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(ev.At), trace.WithAttributes(
		attribute.String("alicia.conversation_id", t.r.cid), attribute.String("alicia.message_id", ev.Turn),
		attribute.String("alicia.sentence_id", ev.Sentence), attribute.Int("alicia.sentence.sequence", int(ev.Seq)))}
	switch {
	case !parent.IsValid():
		parent = tu.trace // audio without trace meta: under the turn
	case !tu.trace.IsValid():
		tu.trace = parent
	case tu.trace.TraceID() != parent.TraceID():
		// A speculative answer's audio is in the trace of its speculative
		// transcript, not in the end of speech's: linked to it.
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: tu.trace}))
	}
	_, span := tracer.Start(withParent(parent), "voice.playout", opts...)
	tu.played = span.SpanContext()
	t.playing = &playout{span: span, turn: ev.Turn, sentence: ev.Sentence}
	t.mu.Unlock()
	if prev != nil { // cut without a word to the tracker
		endSpan(prev.span, playoutUnfinished, 0, ev.At)
	}
}

// endPlayout ends the open voice.playout span, if it is of turnID and
// sentenceID (an empty one matches any), with status and how much was
// played, and returns its span context — else the turn's, for the
// SentencePlayout record.
func (t *tracker) endPlayout(turnID, sentenceID string, status protocol.SentencePlayoutStatus, played time.Duration, at time.Time) trace.SpanContext {
	t.mu.Lock()
	po := t.playing
	if po == nil || turnID != "" && po.turn != turnID || sentenceID != "" && po.sentence != sentenceID {
		var sc trace.SpanContext
		if tu := t.turns[turnID]; tu != nil {
			sc = tu.trace
		}
		t.mu.Unlock()
		return sc
	}
	t.playing = nil
	t.mu.Unlock()
	endSpan(po.span, status, played, at)
	return po.span.SpanContext()
}

func endSpan(span trace.Span, status protocol.SentencePlayoutStatus, played time.Duration, at time.Time) {
	span.SetAttributes(attribute.String("alicia.playout_status", string(status)), attribute.Int64("alicia.played_ms", played.Milliseconds()))
	span.End(trace.WithTimestamp(at))
}

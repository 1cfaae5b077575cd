package agent

import (
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// recorder keeps every span the package's tests end. It is the process's
// tracer provider from the start: the package's tracer comes from the
// global provider, which delegates to the first one set.
var recorder = tracetest.NewSpanRecorder()

func TestMain(m *testing.M) {
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder)))
	os.Exit(m.Run())
}

// testSpans stand for the spans of the other services in the trace of the
// test turn (am_t, answering am_q): the question's voice.end_of_speech and
// the tts.sentence that synthesised each sentence.
var testSpans = func() (s struct {
	endOfSpeech trace.SpanContext
	sentence    map[int32]trace.SpanContext
}) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sc := func(id string) trace.SpanContext {
		sid, _ := trace.SpanIDFromHex(id)
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	}
	s.endOfSpeech = sc("00f067aa0ba902b7")
	s.sentence = map[int32]trace.SpanContext{1: sc("53995c3f42cd8ad8"), 2: sc("5fb397be34d26b51")}
	return s
}()

// ended returns the ended spans named name of conversation cid.
func ended(cid, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.Name() == name && attr(s, "alicia.conversation_id").AsString() == cid {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// userMeta is meta without the trace context.
func userMeta(meta map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range meta {
		if k != telemetry.MetaTraceID && k != telemetry.MetaSpanID {
			out[k] = v
		}
	}
	return out
}

// playoutSpans are the conversation's voice.playout spans by sentence
// sequence.
func playoutSpans(t *testing.T, cid string) map[int64]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[int64]sdktrace.ReadOnlySpan{}
	for _, s := range ended(cid, "voice.playout") {
		seq := attr(s, "alicia.sentence.sequence").AsInt64()
		if out[seq] != nil {
			t.Fatalf("two voice.playout spans of sentence %d", seq)
		}
		out[seq] = s
	}
	return out
}

// checkPlayout: s is the voice.playout span of sentence seq of the test
// turn, under the span that synthesised it, ended with status and played.
func checkPlayout(t *testing.T, s sdktrace.ReadOnlySpan, seq int32, status protocol.SentencePlayoutStatus, played time.Duration) {
	t.Helper()
	if s == nil {
		t.Fatalf("no voice.playout span of sentence %d", seq)
	}
	if want := testSpans.sentence[seq]; s.Parent().SpanID() != want.SpanID() || s.SpanContext().TraceID() != want.TraceID() {
		t.Errorf("voice.playout %d: parent %v in trace %v, want the sentence's tts span %v", seq, s.Parent().SpanID(), s.SpanContext().TraceID(), want.SpanID())
	}
	if got := attr(s, "alicia.message_id").AsString(); got != testTurn {
		t.Errorf("voice.playout %d: message %q", seq, got)
	}
	if got := attr(s, "alicia.sentence_id").AsString(); got != testTurn+"_s"+string(rune('0'+seq)) {
		t.Errorf("voice.playout %d: sentence %q", seq, got)
	}
	if got := attr(s, "alicia.playout_status").AsString(); got != string(status) {
		t.Errorf("voice.playout %d: status %q, want %s", seq, got, status)
	}
	if got := attr(s, "alicia.played_ms").AsInt64(); got != played.Milliseconds() {
		t.Errorf("voice.playout %d: played %d ms, want %v", seq, got, played)
	}
}

// metaSpan is the span an envelope's meta names.
func metaSpan(t *testing.T, env protocol.Envelope) trace.SpanContext {
	t.Helper()
	sc, ok := telemetry.SpanContextFromMeta(env.Meta)
	if !ok {
		t.Fatalf("%s has no trace context in its meta %v", env.Type, env.Meta)
	}
	return sc
}

// The answer played to its end: voice.turn under the question's
// voice.end_of_speech, one voice.playout per sentence under its tts span,
// and each SentencePlayout record under its sentence's voice.playout.
func TestPlayoutSpans(t *testing.T) {
	a := newAnswering(t)
	envs := a.waitFor(t, "the answer did not play to its end", recorded(2))
	cid := a.r.cid

	turns := ended(cid, "voice.turn")
	if len(turns) != 1 {
		t.Fatalf("%d voice.turn spans", len(turns))
	}
	vt := turns[0]
	if vt.Parent().SpanID() != testSpans.endOfSpeech.SpanID() || vt.SpanContext().TraceID() != testSpans.endOfSpeech.TraceID() {
		t.Errorf("voice.turn: parent %v in trace %v, want voice.end_of_speech %v", vt.Parent().SpanID(), vt.SpanContext().TraceID(), testSpans.endOfSpeech)
	}
	if attr(vt, "alicia.voice_to_voice_us").AsInt64() <= 0 || attr(vt, "alicia.message_id").AsString() != testTurn {
		t.Errorf("voice.turn attributes %v", vt.Attributes())
	}
	if l := vt.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != testSpans.sentence[1].SpanID() {
		t.Errorf("voice.turn links %v, want the first sentence's tts span", l)
	}

	spans := playoutSpans(t, cid)
	if len(spans) != 2 {
		t.Fatalf("%d voice.playout spans, want 2", len(spans))
	}
	checkPlayout(t, spans[1], 1, protocol.SentencePlayoutStatusPlayed, time.Second)
	checkPlayout(t, spans[2], 2, protocol.SentencePlayoutStatusPlayed, 100*time.Millisecond)
	if d := spans[1].EndTime().Sub(spans[1].StartTime()); d < 900*time.Millisecond {
		t.Errorf("voice.playout 1 lasted %v for a second of audio", d)
	}
	for _, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok {
			if sc := metaSpan(t, e); sc.SpanID() != spans[int64(p.Sequence)].SpanContext().SpanID() {
				t.Errorf("SentencePlayout %d carries span %v, not its voice.playout", p.Sequence, sc.SpanID())
			}
		}
	}
}

// A barge-in with words: voice.barge_in under the voice.playout of the
// sentence it cut (paused, then interrupted with what was heard), the
// ControlStop under the barge-in, the unplayed sentence's record in the
// turn's trace.
func TestBargeInSpans(t *testing.T) {
	a := newAnswering(t, pausing)
	a.r.turns.bargeIn("am_u", time.Now())
	paused := len(a.wire.frames())
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "wait"})
	envs := a.waitFor(t, "playout not recorded", recorded(2))
	cid := a.r.cid

	spans := playoutSpans(t, cid)
	if len(spans) != 1 {
		t.Fatalf("%d voice.playout spans, want 1 (the second sentence never played)", len(spans))
	}
	po := spans[1]
	checkPlayout(t, po, 1, protocol.SentencePlayoutStatusInterrupted, time.Duration(paused)*frameDur)
	if !hasEvent(po, "playout.paused") {
		t.Errorf("voice.playout events %v: no playout.paused", po.Events())
	}
	bis := ended(cid, "voice.barge_in")
	if len(bis) != 1 {
		t.Fatalf("%d voice.barge_in spans", len(bis))
	}
	bi := bis[0]
	if bi.Parent().SpanID() != po.SpanContext().SpanID() || bi.SpanContext().TraceID() != testSpans.endOfSpeech.TraceID() {
		t.Errorf("voice.barge_in: parent %v in trace %v, want the cut sentence's voice.playout %v", bi.Parent().SpanID(),
			bi.SpanContext().TraceID(), po.SpanContext().SpanID())
	}
	if attr(bi, "alicia.message_id").AsString() != testTurn || attr(bi, "alicia.utterance_id").AsString() != "am_u" {
		t.Errorf("voice.barge_in attributes %v", bi.Attributes())
	}
	for _, e := range envs {
		sc := metaSpan(t, e)
		switch b := e.Body.(type) {
		case *protocol.ControlStop:
			if sc.SpanID() != bi.SpanContext().SpanID() {
				t.Errorf("ControlStop carries span %v, not the barge-in's", sc.SpanID())
			}
		case *protocol.SentencePlayout:
			want := po.SpanContext().SpanID()
			if b.Sequence == 2 {
				want = testSpans.endOfSpeech.SpanID() // unplayed: under the turn
			}
			if sc.SpanID() != want || sc.TraceID() != testSpans.endOfSpeech.TraceID() {
				t.Errorf("SentencePlayout %d (%s) carries span %v, want %v", b.Sequence, b.Status, sc.SpanID(), want)
			}
		}
	}
}

// A false interruption: the cut sentence keeps its voice.playout span,
// paused and played again from its start, and ends played whole.
func TestFalseInterruptionSpans(t *testing.T) {
	a := newAnswering(t, pausing)
	a.r.turns.bargeIn("am_u", time.Now())
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", Final: true})
	a.r.turns.speechEnded("am_u", time.Now(), trace.SpanContext{})
	envs := a.waitFor(t, "the answer did not play to its end", recorded(2))
	spans := playoutSpans(t, a.r.cid)
	if len(spans) != 2 {
		t.Fatalf("%d voice.playout spans, want 2", len(spans))
	}
	checkPlayout(t, spans[1], 1, protocol.SentencePlayoutStatusPlayed, time.Second)
	checkPlayout(t, spans[2], 2, protocol.SentencePlayoutStatusPlayed, 100*time.Millisecond)
	if !hasEvent(spans[1], "playout.paused") || !hasEvent(spans[1], "playout.restarted") {
		t.Errorf("voice.playout events %v: want playout.paused and playout.restarted", spans[1].Events())
	}
	bis := ended(a.r.cid, "voice.barge_in")
	if len(bis) != 1 || bis[0].Parent().SpanID() != spans[1].SpanContext().SpanID() {
		t.Fatalf("voice.barge_in spans %v: want one under the cut sentence's voice.playout", bis)
	}
	for _, e := range envs {
		if _, ok := e.Body.(*protocol.TurnEvent); ok {
			if sc := metaSpan(t, e); sc.SpanID() != bis[0].SpanContext().SpanID() {
				t.Errorf("TurnEvent carries span %v, not the barge-in's", sc.SpanID())
			}
		}
	}
}

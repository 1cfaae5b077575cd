package voicee2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit/otlptest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// TestTraceOfAVoiceTurn: a spoken turn is one trace, exported over OTLP.
// It starts in the room-agent at the end of the user's speech
// (voice.end_of_speech, a root); the asr's job is its child, the llm's turn
// is in it through the UserMessage the asr published, the tts speaks each
// sentence in it, and persistence stores the user's message under it. The
// stored user message carries the trace id.
func TestTraceOfAVoiceTurn(t *testing.T) {
	recv := otlptest.Setup(t)

	const q = "What is the weather like in Paris tomorrow?"
	s := newStack(t, options{answer: "It will be sunny. Enjoy your day!", agent: func(c *roomagent.Config) { c.Speculation = false }})
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript { return fakeopenai.Transcript{Text: q} })
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	final := turnOf(t, s, u, voiceclient.Speech(t, q))

	var traceID string
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		return s.pool.QueryRow(context.Background(), `SELECT coalesce(trace_id, '') FROM alicia_messages WHERE id = $1`, final.ID).Scan(&traceID)
	}, "the user message row")
	if len(traceID) != 32 {
		t.Fatalf("user message row trace_id %q", traceID)
	}
	var spans otlptest.Spans
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		spans = recv.Trace(traceID)
		return spans.Missing("voice.end_of_speech", "asr.job", "asr.transcribe", "llm.turn", "llm.model_request", "tts.sentence",
			"persistence.store UserMessage", "persistence.store AssistantSentence")
	}, "the voice turn's spans exported")
	if root := spans["voice.end_of_speech"]; len(root.ParentSpanId) != 0 {
		t.Errorf("voice.end_of_speech has a parent %x: a spoken turn's trace starts at the end of speech", root.ParentSpanId)
	} else if v := otlptest.Attr(root, "alicia.conversation_id"); v.GetStringValue() != cid {
		t.Errorf("voice.end_of_speech conversation %v, want %s", v, cid)
	}
	for _, pc := range [][2]string{{"asr.job", "voice.end_of_speech"}, {"asr.transcribe", "asr.job"}, {"llm.model_request", "llm.turn"}} {
		if err := spans.ParentIs(pc[0], pc[1]); err != nil {
			t.Error(err)
		}
	}
	// The llm's turn and the tts's sentences hang under the spans that
	// published what they consume (the asr's, the llm's), in this trace.
	inTrace := map[string]bool{}
	for _, sp := range spans {
		inTrace[string(sp.SpanId)] = true
	}
	for _, n := range []string{"llm.turn", "tts.sentence", "persistence.store UserMessage"} {
		if !inTrace[string(spans[n].ParentSpanId)] {
			t.Errorf("%s's parent %x is not a span of the turn's trace", n, spans[n].ParentSpanId)
		}
	}
	if v := otlptest.Attr(spans["llm.model_request"], "gen_ai.request.model"); v.GetStringValue() == "" {
		t.Error("the model request does not name its model")
	}
}

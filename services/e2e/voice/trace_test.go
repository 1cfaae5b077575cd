package voice_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/otlptest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// TestTraceOfAVoiceTurn: a spoken turn is one trace, exported over OTLP.
// It starts in the room-agent at the end of the user's speech
// (voice.end_of_speech, a root); the asr's job is its child, the llm's turn
// is in it through the UserMessage the asr published, the tts speaks each
// sentence in it, and persistence stores the user's message under it. The
// stored user message carries the trace id. The room-agent's playout is in
// it: voice.turn under the end of speech, and each sentence's voice.playout
// under the tts span that made its audio.
func TestTraceOfAVoiceTurn(t *testing.T) {
	recv := otlptest.Setup(t)

	const q = "What is the weather like in Paris tomorrow?"
	s := newStack(t, options{answer: "It will be sunny. Enjoy your day!", agent: func(c *roomagent.Config) { c.Speculation = false }})
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript { return fakeopenai.Transcript{Text: q} })
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	final := turnOf(t, s, u, voiceclient.Speech(t, q))

	traceID := messageTrace(t, s, final.ID)
	var spans otlptest.Spans
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		spans = recv.Trace(traceID)
		return spans.Missing("voice.end_of_speech", "asr.job", "asr.transcribe", "llm.turn", "llm.model_request", "tts.sentence",
			"persistence.store UserMessage", "persistence.store AssistantSentence", "voice.turn", "voice.playout")
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

	// Playout is in the turn's trace too: voice.turn (end of speech → the
	// answer's first frame) under voice.end_of_speech, one voice.playout per
	// sentence played under the tts.sentence that synthesised its audio, and
	// persistence's store of each SentencePlayout under its voice.playout.
	answer := otlptest.Attr(spans["tts.sentence"], "alicia.message_id").GetStringValue()
	if err := spans.ParentIs("voice.turn", "voice.end_of_speech"); err != nil {
		t.Error(err)
	}
	vt := spans["voice.turn"]
	if v := otlptest.Attr(vt, "alicia.voice_to_voice_us").GetIntValue(); v <= 0 {
		t.Errorf("voice.turn voice-to-voice %d us", v)
	}
	if got := otlptest.Attr(vt, "alicia.message_id").GetStringValue(); got == "" || got != answer {
		t.Errorf("voice.turn message %q, want the answer %q", got, answer)
	}
	if got := otlptest.Attr(vt, "alicia.user_message_id").GetStringValue(); got != final.ID {
		t.Errorf("voice.turn user message %q, want %q", got, final.ID)
	}
	const sentences = 2 // "It will be sunny." "Enjoy your day!"
	all := recv.All(traceID)
	testkit.Eventually(t, 20*time.Second, func() bool {
		all = recv.All(traceID)
		playouts, stored := 0, 0
		for _, sp := range all {
			switch sp.Name {
			case "voice.playout":
				playouts++
			case "persistence.store SentencePlayout":
				stored++
			}
		}
		return playouts == sentences && stored == sentences
	}, "a voice.playout and its stored SentencePlayout per sentence in the trace")
	ttsOf := map[string]string{}    // sentence id → its tts.sentence span id
	playoutIDs := map[string]bool{} // voice.playout span ids
	for _, sp := range all {
		if sp.Name == "tts.sentence" {
			ttsOf[otlptest.Attr(sp, "alicia.sentence_id").GetStringValue()] = string(sp.SpanId)
		}
	}
	seqs := map[int64]bool{}
	for _, sp := range all {
		if sp.Name != "voice.playout" {
			continue
		}
		playoutIDs[string(sp.SpanId)] = true
		sid := otlptest.Attr(sp, "alicia.sentence_id").GetStringValue()
		if tts, ok := ttsOf[sid]; !ok || string(sp.ParentSpanId) != tts {
			t.Errorf("voice.playout of sentence %q: parent %x, want its tts.sentence (%x)", sid, sp.ParentSpanId, tts)
		}
		seqs[otlptest.Attr(sp, "alicia.sentence.sequence").GetIntValue()] = true
		for k, want := range map[string]string{"alicia.conversation_id": cid, "alicia.message_id": answer, "alicia.playout_status": "played"} {
			if got := otlptest.Attr(sp, k).GetStringValue(); got != want {
				t.Errorf("voice.playout of sentence %q: %s %q, want %q", sid, k, got, want)
			}
		}
		ms := otlptest.Attr(sp, "alicia.played_ms").GetIntValue()
		if d := int64(sp.EndTimeUnixNano-sp.StartTimeUnixNano) / 1e6; ms <= 0 || d < ms-40 {
			t.Errorf("voice.playout of sentence %q: played %d ms in a span of %d ms", sid, ms, d)
		}
	}
	if !seqs[1] || !seqs[2] {
		t.Errorf("voice.playout sequences %v, want 1 and 2", seqs)
	}
	for _, sp := range all {
		if sp.Name == "persistence.store SentencePlayout" && !playoutIDs[string(sp.ParentSpanId)] {
			t.Errorf("persistence.store SentencePlayout's parent %x is no voice.playout", sp.ParentSpanId)
		}
	}
}

// messageTrace is the trace id stored with message id's row, once stored.
func messageTrace(t *testing.T, s *stack, id string) string {
	t.Helper()
	var traceID string
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		return s.pool.QueryRow(context.Background(), `SELECT coalesce(trace_id, '') FROM alicia_messages WHERE id = $1`, id).Scan(&traceID)
	}, "the message row")
	if len(traceID) != 32 {
		t.Fatalf("message row %s: trace_id %q", id, traceID)
	}
	return traceID
}

// bargeInTrace: the barge-in that cut answer is in the answer's trace —
// its voice.barge_in span under the voice.playout of a sentence of the
// answer (the one it cut, or the last one played), in the trace with the
// answer's tts.sentence spans — and the ControlStop it sent (stop) carries
// that span.
func bargeInTrace(t *testing.T, recv *otlptest.Receiver, answer string, stop protocol.Envelope) {
	t.Helper()
	var traceID, spanID, parentID string
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		for _, sp := range recv.Named("voice.barge_in") {
			if otlptest.Attr(sp, "alicia.message_id").GetStringValue() == answer {
				traceID, spanID, parentID = hex.EncodeToString(sp.TraceId), hex.EncodeToString(sp.SpanId), hex.EncodeToString(sp.ParentSpanId)
				return nil
			}
		}
		return errorf("no voice.barge_in of %s exported", answer)
	}, "the barge-in's span")
	// The sentence it cut goes on playing lowered until the words confirm
	// the interruption: its voice.playout span ends (and is exported) after
	// the barge-in's.
	var under string
	tts := 0
	_ = testkit.CheckFor(20*time.Second, 50*time.Millisecond, func() error {
		under, tts = "", 0
		for _, sp := range recv.All(traceID) {
			if hex.EncodeToString(sp.SpanId) == parentID {
				under = sp.Name + " of " + otlptest.Attr(sp, "alicia.message_id").GetStringValue()
			}
			if sp.Name == "tts.sentence" && otlptest.Attr(sp, "alicia.message_id").GetStringValue() == answer {
				tts++
			}
		}
		if under == "" {
			return errorf("the barge-in's parent span is not exported yet")
		}
		return nil
	})
	if under != "voice.playout of "+answer {
		t.Errorf("voice.barge_in's parent %s is %q, want a voice.playout of the answer %s", parentID, under, answer)
	}
	if tts == 0 {
		t.Errorf("voice.barge_in's trace %s has no tts.sentence of the answer it cut", traceID)
	}
	sc, ok := telemetry.SpanContextFromMeta(stop.Meta)
	if !ok || sc.TraceID().String() != traceID || sc.SpanID().String() != spanID {
		t.Errorf("the barge-in's ControlStop carries trace context %v, want voice.barge_in %s/%s", stop.Meta, traceID, spanID)
	}
}

// TestTraceOfASpeculativeTurn: with speculation on, a turn answered from
// its speculative transcript is still one trace. It starts at the pause
// (voice.speculation, a root, confirmed); the speculative asr job is its
// child and the llm's preemptive turn and the tts's sentences are in it;
// the end of speech is the speculation's child, with the final job (which
// carries the speculative transcript) under it; the stored user message
// carries that trace id, and each sentence's voice.playout is parented on
// its tts.sentence, not merely linked.
func TestTraceOfASpeculativeTurn(t *testing.T) {
	recv := otlptest.Setup(t)

	const q = "What is the weather like in Paris tomorrow?"
	s := newStack(t, options{answer: "It will be sunny. Enjoy your day!", agent: func(c *roomagent.Config) { c.Speculation = true }})
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript { return fakeopenai.Transcript{Text: q} })
	cid := s.conversation()
	jobs := s.asrJobs(cid)
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	final := turnOf(t, s, u, voiceclient.Speech(t, q))
	var finalJob *protocol.ASRJob
	for _, j := range jobs() {
		if j.Final {
			finalJob = j
		}
	}
	if finalJob == nil || finalJob.Transcript == nil || *finalJob.Transcript != q {
		t.Fatalf("final job %+v: want it to carry the speculative transcript (the turn was not speculative)", finalJob)
	}
	if n := len(s.chat.Requests()); n != 1 {
		t.Fatalf("%d model requests, want 1 (the preemptive answer)", n)
	}

	traceID := messageTrace(t, s, final.ID)
	var spans otlptest.Spans
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		spans = recv.Trace(traceID)
		return spans.Missing("voice.speculation", "voice.end_of_speech", "asr.job", "llm.turn", "llm.model_request", "tts.sentence",
			"persistence.store UserMessage", "persistence.store AssistantSentence", "voice.turn", "voice.playout")
	}, "the speculative turn's spans in the user message's trace")
	root := spans["voice.speculation"]
	if len(root.ParentSpanId) != 0 {
		t.Errorf("voice.speculation has a parent %x: a speculation starts the turn's trace", root.ParentSpanId)
	}
	if v := otlptest.Attr(root, "alicia.speculation.outcome").GetStringValue(); v != "confirmed" {
		t.Errorf("voice.speculation outcome %q, want confirmed", v)
	}
	if err := spans.ParentIs("voice.end_of_speech", "voice.speculation"); err != nil {
		t.Error(err)
	}
	if err := spans.ParentIs("voice.turn", "voice.end_of_speech"); err != nil {
		t.Error(err)
	}
	// Two asr jobs in the trace: the speculative one under the speculation,
	// the final one under the end of speech.
	all := recv.All(traceID)
	ids := map[string]string{} // span id → name
	for _, sp := range all {
		ids[string(sp.SpanId)] = sp.Name
	}
	jobParents := map[string]int{}
	for _, sp := range all {
		if sp.Name == "asr.job" {
			jobParents[ids[string(sp.ParentSpanId)]]++
		}
	}
	if jobParents["voice.speculation"] != 1 || jobParents["voice.end_of_speech"] != 1 {
		t.Errorf("asr.job spans by parent %v, want one under voice.speculation and one under voice.end_of_speech", jobParents)
	}
	for _, n := range []string{"llm.turn", "tts.sentence", "persistence.store UserMessage"} {
		if _, ok := ids[string(spans[n].ParentSpanId)]; !ok {
			t.Errorf("%s's parent %x is not a span of the turn's trace", n, spans[n].ParentSpanId)
		}
	}
	// Playout hangs under the tts span that made its audio, in this trace
	// (no link to another trace).
	testkit.Eventually(t, 20*time.Second, func() bool {
		n := 0
		for _, sp := range recv.All(traceID) {
			if sp.Name == "voice.playout" {
				n++
			}
		}
		return n == 2
	}, "a voice.playout per sentence in the trace")
	for _, sp := range recv.All(traceID) {
		if sp.Name != "voice.playout" {
			continue
		}
		if ids[string(sp.ParentSpanId)] != "tts.sentence" {
			t.Errorf("voice.playout's parent is %q, want tts.sentence", ids[string(sp.ParentSpanId)])
		}
		if len(sp.Links) != 0 {
			t.Errorf("voice.playout links %d spans: the answer should be in the turn's own trace", len(sp.Links))
		}
	}
}

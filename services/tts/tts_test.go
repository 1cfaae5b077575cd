package tts_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/tts"
)

var texts = []string{"Hello there.", "This is a test of the speech service.", "Goodbye!"}

func TestVoiceTurnIsSpokenInOrder(t *testing.T) {
	for _, kind := range []protocol.StartAnswerAnswerType{protocol.StartAnswerAnswerTypeVoice, protocol.StartAnswerAnswerTypeTextVoice} {
		t.Run(string(kind), func(t *testing.T) {
			h := newHarness(t, nil)
			cid, turn := "ac_voice", "am_voice"
			h.startAnswer(cid, turn, &kind)
			// The sentence carries the llm's trace: the audio joins it.
			tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
			sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
			traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
			for i, text := range texts {
				h.sentence(traced, cid, turn, int32(i+1), text, i == len(texts)-1)
			}
			rs := h.waitSpoken(turn, 10*time.Second)
			got := sentences(t, rs)
			for i, text := range texts {
				pcm := got[int32(i+1)]
				if want := 2 * samplesFor(text); len(pcm) != want {
					t.Fatalf("sentence %d: %d bytes, want %d", i+1, len(pcm), want)
				}
				if db := dbfs(pcm); db < -40 {
					t.Fatalf("sentence %d: %.1f dBFS, silent", i+1, db)
				}
			}
			for _, r := range rs {
				b := r.body
				if b.ConversationID != cid || b.SentenceID != sentenceID(turn, b.Sequence) || b.SynthStartMs == nil || *b.SynthStartMs <= 0 {
					t.Fatalf("chunk %+v", b)
				}
				if final := b.FinalSentence != nil && *b.FinalSentence; final != (b.Sequence == 3) {
					t.Fatalf("sentence %d finalSentence %v", b.Sequence, final)
				}
				if sc, ok := telemetry.SpanContextFromMeta(r.env.Meta); !ok || sc.TraceID() != tid {
					t.Fatalf("chunk meta %v does not carry the sentence's trace", r.env.Meta)
				}
				if len(b.Data) > 2*2400 {
					t.Fatalf("chunk of %d bytes, more than 100 ms", len(b.Data))
				}
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(h.storedOf(turn)) == 3 }, "three SentenceAudio")
			for _, a := range h.storedOf(turn) {
				want := samplesFor(texts[a.Sequence-1])
				if a.SentenceID != sentenceID(turn, a.Sequence) || a.Format != "pcm_s16le_24000" || a.ByteSize != int32(2*want) ||
					a.DurationMs != int32(want/24) || a.Engine == nil || *a.Engine != "openai:kokoro" || a.Data != nil {
					t.Fatalf("SentenceAudio %+v", a)
				}
			}
			for _, r := range h.fake.SpeechRequests() {
				if r.Model != "kokoro" || r.Voice != "af_sarah" || r.ResponseFormat != "pcm" {
					t.Fatalf("speech request %+v", r)
				}
			}
			if n := h.fake.SpeechCount(); n != 3 {
				t.Fatalf("%d speech requests, want 3", n)
			}
		})
	}
}

func TestStoreAudioKeepsTheBytes(t *testing.T) {
	h := newHarness(t, func(c *tts.Config) { c.StoreAudio = true })
	h.speak("ac_store", "am_store", texts[1])
	got := sentences(t, h.waitSpoken("am_store", 10*time.Second))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(h.storedOf("am_store")) == 1 }, "SentenceAudio")
	if a := h.storedOf("am_store")[0]; !bytes.Equal(a.Data, got[1]) || int(a.ByteSize) != len(a.Data) {
		t.Fatalf("stored %d bytes (byteSize %d), played %d", len(a.Data), a.ByteSize, len(got[1]))
	}
}

func TestTextTurnIsNotSpoken(t *testing.T) {
	h := newHarness(t, nil)
	for _, c := range []struct {
		cid  string
		kind *protocol.StartAnswerAnswerType
	}{{"ac_text", protocol.Ptr(protocol.StartAnswerAnswerTypeText)}, {"ac_none", nil}} {
		h.startAnswer(c.cid, "am_"+c.cid, c.kind)
		h.sentence(context.Background(), c.cid, "am_"+c.cid, 1, "Only text here.", true)
	}
	// A voice turn published after them is spoken: they were seen and skipped.
	h.speak("ac_barrier", "am_barrier", "Now speak.")
	h.waitSpoken("am_barrier", 10*time.Second)
	for _, turn := range []string{"am_ac_text", "am_ac_none"} {
		if n := len(h.audioOf(turn)); n != 0 {
			t.Fatalf("%s: %d SpeechAudio for a text answer", turn, n)
		}
	}
	if n := h.fake.SpeechCount(); n != 1 {
		t.Fatalf("%d speech requests, want only the voice turn's", n)
	}
}

func TestBackendFailure(t *testing.T) {
	cases := []struct {
		name    string
		fail    int
		spoken  bool // sentence 1 spoken after all
		wantErr bool
	}{
		{"one failure is retried", 1, true, false},
		{"two failures: ErrorMessage 503, next sentence spoken", 2, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.FailNextSpeech(c.fail, 500)
			cid, turn := "ac_fail", "am_fail"
			h.speak(cid, turn, texts[0], texts[1])
			got := sentences(t, h.waitSpoken(turn, 10*time.Second))
			if len(got[2]) != 2*samplesFor(texts[1]) {
				t.Fatalf("sentence 2: %d bytes", len(got[2]))
			}
			if c.spoken != (len(got[1]) == 2*samplesFor(texts[0])) {
				t.Fatalf("sentence 1: %d bytes, spoken %v", len(got[1]), c.spoken)
			}
			if !c.spoken && len(got[1]) != 0 {
				t.Fatalf("failed sentence 1 has %d bytes", len(got[1]))
			}
			errs := h.errors()
			if !c.wantErr {
				if len(errs) != 0 {
					t.Fatalf("errors %+v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("%d ErrorMessages, want 1", len(errs))
			}
			e := errs[0]
			if e.Code != protocol.CodeBackendUnavailable || !e.Recoverable || e.OriginatingID == nil || *e.OriginatingID != sentenceID(turn, 1) || e.ConversationID != cid {
				t.Fatalf("ErrorMessage %+v", e)
			}
			if n := h.fake.SpeechCount(); n != 3 {
				t.Fatalf("%d speech requests, want 3 (sentence 1 twice, sentence 2 once)", n)
			}
		})
	}
}

// TestOpenAIStreamsBeforeTheBodyEnds: the first chunk is out while the
// backend still holds the rest of the sentence.
func TestOpenAIStreamsBeforeTheBodyEnds(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.SetSpeechFault(fakeopenai.Fault{ChunkDelay: time.Hour})
	h.speak("ac_stream", "am_stream", texts[1])
	testkit.Eventually(t, 10*time.Second, func() bool { return len(h.audioOf("am_stream")) >= 1 }, "first chunk")
	first := h.audioOf("am_stream")[0].body
	if first.Chunk != 0 || first.Last || len(first.Data) == 0 {
		t.Fatalf("first chunk %+v", first)
	}
	h.stop("ac_stream", nil, protocol.ControlStopStopTypeSpeech) // end the held request
}

func TestPacingKeepsSynthesisNearPlayout(t *testing.T) {
	h := newHarness(t, func(c *tts.Config) { c.MaxAhead = 1 })
	// 20 characters: 1.2 s of audio each.
	three := []string{"Twenty characters 1.", "Twenty characters 2.", "Twenty characters 3."}
	h.speak("ac_pace", "am_pace", three...)
	rs := h.waitSpoken("am_pace", 15*time.Second)
	starts := map[int32]int64{}
	for _, r := range rs {
		starts[r.body.Sequence] = *r.body.SynthStartMs
	}
	// Sentence 3 waits until sentence 2 starts playing, after sentence 1's 1.2 s.
	if d := time.Duration(starts[3]-starts[1]) * time.Millisecond; d < 1100*time.Millisecond {
		t.Fatalf("sentence 3 synthesised %v after sentence 1, want ≥ 1.1 s", d)
	}
	if d := time.Duration(starts[2]-starts[1]) * time.Millisecond; d > 500*time.Millisecond {
		t.Fatalf("sentence 2 synthesised %v after sentence 1: it should not wait", d)
	}
}

func TestEspeakEngine(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		testkit.Missing(t, "espeak-ng is not installed: %v", err)
	}
	h := newHarness(t, func(c *tts.Config) { c.Engine = tts.EngineEspeak })
	h.speak("ac_espeak", "am_espeak", "Hello, this is Alicia.", "How can I help you today?")
	got := sentences(t, h.waitSpoken("am_espeak", 10*time.Second))
	for seq, pcm := range got {
		d := time.Duration(len(pcm)/2) * time.Second / 24000
		if d < 800*time.Millisecond || d > 4*time.Second {
			t.Fatalf("sentence %d: %v of speech", seq, d)
		}
		if db := dbfs(pcm); db < -35 {
			t.Fatalf("sentence %d: %.1f dBFS", seq, db)
		}
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(h.storedOf("am_espeak")) == 2 }, "SentenceAudio")
	if e := h.storedOf("am_espeak")[0].Engine; e == nil || *e != "espeak:en-us" {
		t.Fatalf("engine %v", e)
	}
}

// TestReplicasKeepEachTurnInOrder: with two replicas each turn is spoken
// by one of them, in order, each sentence once.
func TestReplicasKeepEachTurnInOrder(t *testing.T) {
	h := newHarness(t, nil)
	second := h.cfg
	h.startReplica(second)
	const n = 8
	for i := range n {
		go h.speak(fmt.Sprintf("ac_r%d", i), fmt.Sprintf("am_r%d", i), texts...)
	}
	for i := range n {
		turn := fmt.Sprintf("am_r%d", i)
		got := sentences(t, h.waitSpoken(turn, 15*time.Second))
		for seq, text := range texts {
			if len(got[int32(seq+1)]) != 2*samplesFor(text) {
				t.Fatalf("%s sentence %d: %d bytes", turn, seq+1, len(got[int32(seq+1)]))
			}
		}
	}
	if c := h.fake.SpeechCount(); c != n*len(texts) {
		t.Fatalf("%d speech requests, want %d", c, n*len(texts))
	}
}

// TestHandOverResumesAfterTheLastStoredSentence: a replica that stops
// mid-turn hands the turn back; the next one speaks only what is left.
func TestHandOverResumesAfterTheLastStoredSentence(t *testing.T) {
	h := newHarness(t, nil)
	cid, turn := "ac_hand", "am_hand"
	h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	h.sentence(context.Background(), cid, turn, 1, texts[0], false)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(h.storedOf(turn)) == 1 }, "sentence 1 stored")
	// The first replica shuts down (the harness's one); a new one takes over.
	h.stopFirst()
	h.startReplica(h.cfg)
	h.sentence(context.Background(), cid, turn, 2, texts[1], true)
	got := sentences(t, h.waitSpoken(turn, 15*time.Second))
	if len(got[1]) != 2*samplesFor(texts[0]) || len(got[2]) != 2*samplesFor(texts[1]) {
		t.Fatalf("sentence bytes %d, %d", len(got[1]), len(got[2]))
	}
	inputs := []string{}
	for _, r := range h.fake.SpeechRequests() {
		inputs = append(inputs, r.Input)
	}
	if !slices.Equal(inputs, texts[:2]) {
		t.Fatalf("synthesised %q, want each sentence once", inputs)
	}
}

func TestConfig(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		ok    bool
		check func(tts.Config) bool
	}{
		{"defaults", nil, true, func(c tts.Config) bool {
			return c.Engine == "openai" && c.Model == "kokoro" && c.Voice == "" && tts.DefaultVoice(c.Engine) == "af_sarah" && c.EspeakPath == "espeak-ng"
		}},
		{"espeak", map[string]string{"ALICIA_TTS_ENGINE": "espeak", "ALICIA_TTS_URL": ""}, true, func(c tts.Config) bool {
			return c.Engine == "espeak" && tts.DefaultVoice(c.Engine) == "en-us"
		}},
		{"all set", map[string]string{"ALICIA_TTS_URL": "http://speaches:8000/v1", "ALICIA_TTS_MODEL": "m", "ALICIA_TTS_VOICE": "v",
			"ALICIA_TTS_STORE_AUDIO": "true", "ALICIA_TTS_API_KEY": "k", "ALICIA_ESPEAK_PATH": "/usr/bin/espeak-ng", "ALICIA_TTS_MAX_AHEAD": "3"}, true,
			func(c tts.Config) bool {
				return c.URL == "http://speaches:8000/v1" && c.Model == "m" && c.Voice == "v" && c.StoreAudio && c.APIKey == "k" && c.MaxAhead == 3
			}},
		{"unknown engine", map[string]string{"ALICIA_TTS_ENGINE": "piper"}, false, nil},
		{"bad url", map[string]string{"ALICIA_TTS_URL": "speaches:8000"}, false, nil},
		{"bad format", map[string]string{"ALICIA_TTS_RESPONSE_FORMAT": "mp3"}, false, nil},
		{"bad bool", map[string]string{"ALICIA_TTS_STORE_AUDIO": "maybe"}, false, nil},
		{"chunk too small", map[string]string{"ALICIA_TTS_CHUNK": "1ms"}, false, nil},
		{"max ahead 0", map[string]string{"ALICIA_TTS_MAX_AHEAD": "0"}, false, nil},
		{"ahead ttl default", nil, true, func(c tts.Config) bool { return c.AheadTTL == 30*time.Second }},
		{"nothing ahead", map[string]string{"ALICIA_TTS_AHEAD_TTL": "0s"}, true, func(c tts.Config) bool { return c.AheadTTL == 0 }},
		{"ahead ttl negative", map[string]string{"ALICIA_TTS_AHEAD_TTL": "-1s"}, false, nil},
		{"speed default", nil, true, func(c tts.Config) bool { return c.Speed == 1 }},
		{"speed", map[string]string{"ALICIA_TTS_SPEED": "1.2"}, true, func(c tts.Config) bool { return c.Speed == 1.2 }},
		{"speed too fast", map[string]string{"ALICIA_TTS_SPEED": "3"}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := tts.ConfigFromEnv()
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok %v", err, c.ok)
			}
			if c.check != nil && !c.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		c := tts.DefaultConfig()
		c.NATSURL, c.Engine, c.MaxTurns = "", "piper", 0
		err := c.Validate()
		for _, want := range []string{"ALICIA_NATS_URL", "ALICIA_TTS_ENGINE", "ALICIA_TTS_MAX_TURNS"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v does not name %s", err, want)
			}
		}
	})
	t.Run("espeak missing at start", func(t *testing.T) {
		c := tts.DefaultConfig()
		c.Engine, c.EspeakPath = tts.EngineEspeak, "/nonexistent/espeak-ng"
		err := tts.Run(context.Background(), c, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), "espeak-ng not found") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestTurnPublishedWhileNoReplicaRuns: a replica that starts later takes
// the turn and reads its sentences from the stream.
func TestTurnPublishedWhileNoReplicaRuns(t *testing.T) {
	h := newHarness(t, nil)
	h.stopFirst() // the durable consumer stays
	h.speak("ac_late", "am_late", texts...)
	h.startReplica(h.cfg)
	got := sentences(t, h.waitSpoken("am_late", 10*time.Second))
	for i, text := range texts {
		if len(got[int32(i+1)]) != 2*samplesFor(text) {
			t.Fatalf("sentence %d: %d bytes", i+1, len(got[int32(i+1)]))
		}
	}
}

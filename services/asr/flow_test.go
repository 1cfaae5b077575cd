package asr_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/asr/internal/metrics"
)

const sentence = "what is the weather like in Paris today"

// sampleCount is how many observations a histogram has.
func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// An utterance spoken over 1.8 s: two partial transcripts while the user
// speaks, growing with the audio, then the final one and its user message.
func TestPartialsAndFinal(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	fake.SetTranscriber(fakeopenai.Growing(sentence, 250*time.Millisecond))
	h.replica(h.config(fake))
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	u := newUtterance(cid)
	m := metrics.Default()
	endToFinal := sampleCount(t, m.SpeechEndToFinal)

	h.publish(u.job(false, 600*time.Millisecond))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.transcriptions()) == 1 }, "first partial")
	h.publish(u.job(false, 1200*time.Millisecond))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.transcriptions()) == 2 }, "second partial")
	final := u.job(true, 1800*time.Millisecond)
	h.publish(final)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")

	trs := rec.transcriptions()
	want := []string{"what is the", "what is the weather like", sentence}
	if !slices.Equal(texts(trs), want) {
		t.Fatalf("transcriptions %q, want %q", texts(trs), want)
	}
	for i, tr := range trs {
		if tr.ID != u.id || tr.ConversationID != cid || tr.Final != (i == 2) || tr.Language == nil || *tr.Language != "en" ||
			tr.Confidence == nil || math.Abs(*tr.Confidence-math.Exp(fakeopenai.DefaultAvgLogprob)*(1-fakeopenai.DefaultNoSpeechProb)) > 0.001 {
			t.Errorf("transcription %d = %+v", i, tr)
		}
	}
	all := rec.all()
	um := rec.userMessages()[0]
	body := um.Env.Body.(*protocol.UserMessage)
	if um.Subject != subjects.Client(cid, protocol.TypeUserMessage) || body.ID != u.id || body.Content != sentence ||
		body.Timestamp == nil || *body.Timestamp != *final.SpeechEndMs || um.Env.StanzaID != 0 {
		t.Errorf("user message on %s: %+v", um.Subject, body)
	}
	if all[len(all)-1].Subject != um.Subject || all[len(all)-2].Env.Type != protocol.TypeTranscription {
		t.Errorf("the user message must follow the final transcription")
	}
	// Meta travels on: the user, and the job's trace (continued by a child span).
	for _, s := range all {
		if s.Env.Meta[edge.MetaUserID] != testUser || s.Env.Meta[telemetry.MetaTraceID] != testTrace {
			t.Errorf("%s meta = %v", s.Env.Type, s.Env.Meta)
		}
		if s.Env.Type == protocol.TypeTranscription && s.Subject != subjects.Server(cid, protocol.TypeTranscription) {
			t.Errorf("transcription on %s", s.Subject)
		}
	}
	// Whisper got each job's audio as WAV, with the hints.
	reqs := fake.TranscriptionRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d transcription requests", len(reqs))
	}
	for i, r := range reqs {
		if r.SampleRate != 16000 || r.Channels != 1 || r.Duration != time.Duration(i+1)*600*time.Millisecond ||
			r.Model != "whisper-large-v3" || r.ResponseFormat != "verbose_json" || r.Language != "en" ||
			r.Prompt != "Earlier: good morning." || r.LevelDBFS < -30 {
			t.Errorf("request %d: %d Hz, %s, %q, %q, %q, %.0f dBFS", i, r.SampleRate, r.Duration, r.Model, r.ResponseFormat, r.Language, r.LevelDBFS)
		}
	}
	if n := sampleCount(t, m.SpeechEndToFinal); n != endToFinal+1 {
		t.Errorf("end of speech → final observed %d times, want once more than %d", n, endToFinal)
	}
	if n := testutil.ToFloat64(m.Jobs.WithLabelValues("partial", "published")); n < 2 {
		t.Errorf("published partials counted %v", n)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return h.queued() == 0 }, "jobs acknowledged")
}

// The same final job delivered again (the room-agent resent it after a lost
// acknowledgement) makes no second transcription or user message.
func TestResentFinalOneUserMessage(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	h.replica(h.config(fake))
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	final := newUtterance(cid).job(true, time.Second)
	h.publish(final)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")
	h.publish(final)
	testkit.Eventually(t, 5*time.Second, func() bool { return fake.TranscriptionCount() == 2 && h.queued() == 0 }, "second delivery done")
	// A later utterance shows everything before it is stored.
	next := newUtterance(cid).job(true, time.Second)
	h.publish(next)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 2 }, "next user message")
	if n := len(rec.transcriptions()); n != 2 {
		t.Errorf("%d final transcriptions, want one per utterance", n)
	}
}

// A final transcript below the confidence floor, or empty, or heard by the
// room-agent as a backchannel over an answer or as the answer's echo, is shown to the client as the
// final transcription but is not the user's message.
func TestConfidenceFloor(t *testing.T) {
	low := fakeopenai.Transcript{Segments: []fakeopenai.Segment{
		{Text: "uh thank you", AvgLogprob: -1.2, NoSpeechProb: 0.5}, // 0.15
	}}
	mixed := fakeopenai.Transcript{Segments: []fakeopenai.Segment{
		{Start: 0, End: 800 * time.Millisecond, Text: "turn the lights off", AvgLogprob: -0.1, NoSpeechProb: 0.01},
		{Start: 800 * time.Millisecond, End: time.Second, Text: "uh", AvgLogprob: -2, NoSpeechProb: 0.8},
	}}
	for _, tc := range []struct {
		name     string
		floor    float64
		script   fakeopenai.Transcript
		silence  bool
		text     string
		conf     float64 // -1: none
		userText bool
	}{
		{"clear", 0.3, fakeopenai.Transcript{Text: "Turn the lights off."}, false, "Turn the lights off.", 0.763, true},
		{"below the floor", 0.3, low, false, "uh thank you", 0.151, false},
		{"floor lowered", 0.1, low, false, "uh thank you", 0.151, true},
		{"weighted by duration", 0.6, mixed, false, "turn the lights off uh", 0.722, true},
		{"nothing said", 0.3, fakeopenai.Transcript{}, true, "", -1, false},
		// The room-agent heard it over an answer as a backchannel.
		{"backchannel", 0.3, fakeopenai.Transcript{Text: "Mm-hmm."}, false, "Mm-hmm.", 0.763, false},
		// The room-agent heard it over an answer as the answer's own echo.
		{"echo", 0.3, fakeopenai.Transcript{Text: "The weather in Paris is mild."}, false, "The weather in Paris is mild.", 0.763, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			fake.EnqueueTranscripts(tc.script)
			cfg := h.config(fake)
			cfg.MinConfidence = tc.floor
			h.replica(cfg)
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			j := newUtterance(cid).job(true, time.Second)
			if tc.silence {
				j.Data = make([]byte, len(j.Data))
			}
			switch tc.name {
			case "backchannel":
				j.Backchannel = protocol.Ptr(true)
			case "echo":
				j.Echo = protocol.Ptr(true)
			}
			h.publish(j)
			testkit.Eventually(t, 5*time.Second, func() bool { return rec.final() != nil && h.queued() == 0 }, "final transcription")
			if tc.userText {
				testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")
			}
			// Let anything else come: a later utterance's user message follows all of it.
			h.publish(newUtterance(cid).job(true, time.Second))
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.transcriptions()) == 2 && h.queued() == 0 }, "next utterance")
			fin := rec.final()
			if fin.Text != tc.text {
				t.Errorf("final text %q, want %q", fin.Text, tc.text)
			}
			switch {
			case tc.conf < 0 && fin.Confidence != nil:
				t.Errorf("confidence %v for nothing said", *fin.Confidence)
			case tc.conf >= 0 && (fin.Confidence == nil || math.Abs(*fin.Confidence-tc.conf) > 0.002):
				t.Errorf("confidence %v, want %.3f", fin.Confidence, tc.conf)
			}
			var mine int
			for _, s := range rec.userMessages() {
				if s.Env.Body.(*protocol.UserMessage).ID == j.UtteranceID {
					mine++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.userText]; mine != want {
				t.Errorf("%d user messages for the utterance, want %d", mine, want)
			}
		})
	}
}

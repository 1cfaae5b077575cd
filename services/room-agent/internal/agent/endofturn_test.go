package agent

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// speakingListener is a listener of a room with cfg whose detector has an
// utterance open (utt): 200 ms of near silence, then 300 ms of a loud tone.
func speakingListener(t *testing.T, cfg Config, utt string) *listener {
	t.Helper()
	det, err := vad.New(vad.Config{SampleRate: asrRate, EndSilence: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pcm := make([]int16, asrRate/2)
	for i := range pcm {
		if i < asrRate/5 {
			pcm[i] = int16(3 * (1 - 2*(i%2)))
		} else {
			pcm[i] = int16(3000 * math.Sin(2*math.Pi*200*float64(i)/asrRate))
		}
	}
	det.Push(pcm, func(vad.Event) {})
	if !det.InSpeech() {
		t.Fatal("no utterance open")
	}
	l := &listener{det: det, utt: utt}
	l.r = &Room{cfg: cfg, listeners: map[string]*listener{"TR_1": l}}
	return l
}

// TestTranscriptSetsEndSilence: a transcript of the open utterance sets its
// end silence when the listener knows what it heard; others change nothing.
func TestTranscriptSetsEndSilence(t *testing.T) {
	const utt = "am_open"
	tr := func(id, text string) *protocol.Transcription {
		return &protocol.Transcription{ID: id, ConversationID: "ac_1", Text: text}
	}
	for _, c := range []struct {
		name  string
		cfg   Config
		setup func(l *listener)
		tr    *protocol.Transcription
		job   string
		spec  bool
		want  time.Duration
	}{
		{name: "complete partial", tr: tr(utt, "What time is it?"), job: "aj_1", want: 300 * time.Millisecond},
		{name: "trailing partial", tr: tr(utt, "I need milk and"), job: "aj_1", want: time.Second},
		{name: "custom bounds", cfg: Config{EndOfTurn: vad.EndOfTurn{Min: 200 * time.Millisecond, Max: 800 * time.Millisecond}},
			tr: tr(utt, "I need milk and"), job: "aj_1", want: 800 * time.Millisecond},
		{name: "off", cfg: Config{EndOfTurn: vad.EndOfTurn{Off: true}}, tr: tr(utt, "What time is it?"), job: "aj_1", want: 500 * time.Millisecond},
		{name: "another utterance", tr: tr("am_old", "What time is it?"), job: "aj_1", want: 500 * time.Millisecond},
		{name: "unknown job", tr: tr(utt, "What time is it?"), job: "aj_unknown", want: 500 * time.Millisecond},
		{name: "no job id", tr: tr(utt, "What time is it?"), job: "", want: 500 * time.Millisecond},
		{name: "stale partial: speech after its audio", tr: tr(utt, "What time is it?"), job: "aj_early", want: 500 * time.Millisecond},
		{name: "final", tr: &protocol.Transcription{ID: utt, Text: "What time is it?", Final: true}, job: "aj_1", want: 500 * time.Millisecond},
		{name: "language of the transcript", tr: &protocol.Transcription{ID: utt, Text: "Ik wil melk.", Language: protocol.Ptr("nl")},
			job: "aj_1", want: 500 * time.Millisecond},
		{name: "speculative", setup: func(l *listener) { l.spec = &speculation{jobID: "aj_spec", utt: utt} },
			tr: tr(utt, "What time is it?"), job: "aj_spec", spec: true, want: 300 * time.Millisecond},
		{name: "dropped speculation", setup: func(l *listener) { l.spec = &speculation{jobID: "aj_spec2", utt: utt} },
			tr: tr(utt, "What time is it?"), job: "aj_spec", spec: true, want: 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := speakingListener(t, c.cfg, utt)
			l.partials.sent(utt, "aj_early", 640) // 20 ms: before the speech
			l.partials.sent(utt, "aj_1", 1<<20)
			if c.setup != nil {
				c.setup(l)
			}
			l.r.endOfTurn(c.tr, c.job, c.spec)
			if got := l.det.EndSilence(); got != c.want {
				t.Fatalf("end silence %v, want %v", got, c.want)
			}
		})
	}
}

func TestPartialJobsForgetTheLastUtterance(t *testing.T) {
	var p partialJobs
	p.sent("am_1", "aj_1", 100)
	p.sent("am_2", "aj_2", 200)
	if _, ok := p.heard("am_2", "aj_1"); ok {
		t.Fatal("a job of the last utterance is remembered for the next")
	}
	if n, ok := p.heard("am_2", "aj_2"); !ok || n != 200 {
		t.Fatalf("heard %d %v, want 200", n, ok)
	}
}

func TestTranscriptJobID(t *testing.T) {
	for _, c := range []struct{ msgID, want string }{
		{"aj_abc:tr", "aj_abc"},
		{"ac_1:asr:am_1", ""},
		{"", ""},
	} {
		h := nats.Header(http.Header{})
		if c.msgID != "" {
			h.Set("Nats-Msg-Id", c.msgID)
		}
		if got := transcriptJobID(h); got != c.want {
			t.Fatalf("transcriptJobID(%q) = %q, want %q", c.msgID, got, c.want)
		}
	}
}

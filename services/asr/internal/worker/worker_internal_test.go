package worker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/asr/internal/metrics"
	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scripted is a Transcriber that always hears text.
type scripted struct {
	text  string
	conf  float64
	calls atomic.Int32
}

func (s *scripted) Transcribe(context.Context, whisper.Request) (whisper.Result, error) {
	s.calls.Add(1)
	c := s.conf
	return whisper.Result{Text: s.text, Confidence: &c, Language: "en"}, nil
}

func newWorker(t *testing.T, asr Transcriber) (*Worker, jetstream.JetStream) {
	t.Helper()
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
	ctx := t.Context()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	jobs, err := js.Stream(ctx, bus.StreamASRJobs)
	if err != nil {
		t.Fatal(err)
	}
	convs, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Ensure(ctx, Deps{JS: js, Jobs: jobs, Conversations: convs, Publisher: bus.NewPublisher(js),
		DeadLetters: bus.NewDeadLetters(js), ASR: asr, Metrics: metrics.Default(), Log: zerolog.Nop()},
		Settings{Consumer: "asr", Concurrency: 1, AckWait: 5 * time.Second, MaxDeliver: 3, MinConfidence: 0.3,
			Attempts: 1, PublishTimeout: 5 * time.Second, PullWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return w, js
}

func testJob(cid, utterance string, seq uint64, final bool, delivered uint64) *job {
	b := &protocol.ASRJob{ID: protocol.NewID("aj"), UtteranceID: utterance, ConversationID: cid, Sequence: int32(seq),
		Final: final, Format: audio.PCMFormat(16000), Data: make([]byte, 3200), DurationMs: 100, CreatedAt: time.Now().UnixMilli()}
	return &job{env: protocol.New(cid, b), body: b, cid: cid, seq: seq, delivered: delivered, rate: 16000}
}

// stored reads the conversation's envelopes of type t from CONVERSATIONS.
func stored(t *testing.T, js jetstream.JetStream, cid string, typ protocol.MessageType) []*jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(t.Context(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			continue
		}
		if m.Subject == subjects.Server(cid, typ) || m.Subject == subjects.Client(cid, typ) {
			out = append(out, m)
		}
	}
	return out
}

// Partials of many jobs finishing at the same moment on different workers:
// the transcriptions that land are in job order, and the latest always lands.
func TestOrderedPublishIsAtomic(t *testing.T) {
	w, js := newWorker(t, &scripted{})
	cid, utt := protocol.NewID("ac"), protocol.NewID("am")
	const n = 16
	start := make(chan struct{})
	var wg sync.WaitGroup
	published := make([]bool, n+1)
	for seq := uint64(1); seq <= n; seq++ {
		wg.Go(func() {
			j := testJob(cid, utt, seq, false, 1)
			<-start
			ok, err := w.publishTranscription(t.Context(), j, &protocol.Transcription{ID: utt, ConversationID: cid, Text: strconv.FormatUint(seq, 10)}, true)
			if err != nil {
				t.Errorf("job %d: %v", seq, err)
			}
			published[seq] = ok
		})
	}
	close(start)
	wg.Wait()
	msgs := stored(t, js, cid, protocol.TypeTranscription)
	var last uint64
	for _, m := range msgs {
		seq, _ := strconv.ParseUint(m.Header.Get(HeaderJobSequence), 10, 64)
		if seq <= last {
			t.Errorf("transcription of job %d stored after job %d's", seq, last)
		}
		last = seq
	}
	if last != n || !published[n] {
		t.Errorf("last stored job %d, want %d", last, n)
	}
	t.Logf("%d of %d partials landed", len(msgs), n)
}

// A final job delivered again after its worker died: what the earlier try
// published is not done twice, and not transcribed again.
func TestRedeliveredFinal(t *testing.T) {
	t.Run("user message out", func(t *testing.T) {
		asr := &scripted{text: "Turn the lights off.", conf: 0.9}
		w, js := newWorker(t, asr)
		cid := protocol.NewID("ac")
		j := testJob(cid, protocol.NewID("am"), 1, true, 1)
		if err := w.process(t.Context(), j, func() {}); err != nil {
			t.Fatal(err)
		}
		j.delivered = 2
		if err := w.process(t.Context(), j, func() {}); err != nil {
			t.Fatal(err)
		}
		if n := asr.calls.Load(); n != 1 {
			t.Errorf("transcribed %d times", n)
		}
		if n := len(stored(t, js, cid, protocol.TypeUserMessage)); n != 1 {
			t.Errorf("%d user messages", n)
		}
	})
	t.Run("only the final transcription out", func(t *testing.T) {
		asr := &scripted{text: "Turn the light of.", conf: 0.9}
		w, js := newWorker(t, asr)
		cid, utt := protocol.NewID("ac"), protocol.NewID("am")
		j := testJob(cid, utt, 1, true, 1)
		conf := 0.8
		// What the earlier try published before it died.
		if _, err := w.publishTranscription(t.Context(), j, &protocol.Transcription{ID: utt, ConversationID: cid, Final: true,
			Text: "Turn the lights off.", Confidence: &conf}, false); err != nil {
			t.Fatal(err)
		}
		j.delivered = 2
		if err := w.process(t.Context(), j, func() {}); err != nil {
			t.Fatal(err)
		}
		ums := stored(t, js, cid, protocol.TypeUserMessage)
		if len(ums) != 1 || asr.calls.Load() != 0 {
			t.Fatalf("%d user messages, %d transcriptions", len(ums), asr.calls.Load())
		}
		env, err := protocol.Decode(ums[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		if got := env.Body.(*protocol.UserMessage).Content; got != "Turn the lights off." {
			t.Errorf("user message %q, want the published final transcript", got)
		}
		if n := len(stored(t, js, cid, protocol.TypeTranscription)); n != 1 {
			t.Errorf("%d final transcriptions", n)
		}
	})
	t.Run("earlier final below the floor", func(t *testing.T) {
		asr := &scripted{text: "anything", conf: 0.9}
		w, js := newWorker(t, asr)
		cid, utt := protocol.NewID("ac"), protocol.NewID("am")
		j := testJob(cid, utt, 1, true, 1)
		conf := 0.1
		if _, err := w.publishTranscription(t.Context(), j, &protocol.Transcription{ID: utt, ConversationID: cid, Final: true,
			Text: "uh", Confidence: &conf}, false); err != nil {
			t.Fatal(err)
		}
		j.delivered = 2
		if err := w.process(t.Context(), j, func() {}); err != nil {
			t.Fatal(err)
		}
		if n := len(stored(t, js, cid, protocol.TypeUserMessage)); n != 0 || asr.calls.Load() != 0 {
			t.Errorf("%d user messages, %d transcriptions", n, asr.calls.Load())
		}
	})
}

func TestDecode(t *testing.T) {
	cid := protocol.NewID("ac")
	good := testJob(cid, protocol.NewID("am"), 1, true, 1).body
	enc := func(env protocol.Envelope) []byte {
		b, err := protocol.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	with := func(f func(*protocol.ASRJob)) []byte {
		b := *good
		f(&b)
		return enc(protocol.New(cid, &b))
	}
	for _, tc := range []struct {
		name    string
		subject string
		data    []byte
		code    int32
	}{
		{"good", subjects.ASRJob(cid), enc(protocol.New(cid, good)), 0},
		{"garbage", subjects.ASRJob(cid), []byte{0xc1}, protocol.CodeMalformed},
		{"wrong type", subjects.ASRJob(cid), enc(protocol.New(cid, &protocol.UserMessage{ID: "am_1", ConversationID: cid, Content: "x"})), protocol.CodeUnknownType},
		{"8 kHz is fine", subjects.ASRJob(cid), with(func(j *protocol.ASRJob) { j.Format = audio.PCMFormat(8000) }), 0},
		{"mp3", subjects.ASRJob(cid), with(func(j *protocol.ASRJob) { j.Format = "mp3" }), protocol.CodeInvalidBody},
		{"one byte of audio", subjects.ASRJob(cid), with(func(j *protocol.ASRJob) { j.Data = []byte{1} }), protocol.CodeInvalidBody},
		{"no utterance", subjects.ASRJob(cid), with(func(j *protocol.ASRJob) { j.UtteranceID = "" }), protocol.CodeInvalidBody},
		{"on another conversation's queue", subjects.ASRJob("ac_other"), enc(protocol.New(cid, good)), protocol.CodeInvalidBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := decode(tc.subject, tc.data, bus.Delivery{Sequence: 7, NumDelivered: 2})
			if got := protocol.Code(err); got != tc.code {
				t.Fatalf("code %d (%v), want %d", got, err, tc.code)
			}
			if err == nil && (j.seq != 7 || j.delivered != 2 || j.cid != cid || j.rate == 0) {
				t.Errorf("job %+v", j)
			}
		})
	}
}

type panicking struct{}

func (panicking) Transcribe(context.Context, whisper.Request) (whisper.Result, error) {
	panic("backend client bug")
}

// A job that crashes its handler is given up (dead-lettered, the client
// told) instead of crashing each replica it would be redelivered to.
func TestPanickingJobGivenUp(t *testing.T) {
	w, js := newWorker(t, panicking{})
	cid := protocol.NewID("ac")
	j := testJob(cid, protocol.NewID("am"), 0, true, 1)
	data, err := protocol.Encode(j.env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), subjects.ASRJob(cid), data); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, ctx) }()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, 5*time.Second, func() bool {
		dlq, err := js.Stream(t.Context(), bus.StreamDeadLetter)
		return err == nil && dlq.CachedInfo().State.Msgs == 1 && len(stored(t, js, cid, protocol.TypeErrorMessage)) == 1
	}, "dead letter and error message")
	env, err := protocol.Decode(stored(t, js, cid, protocol.TypeErrorMessage)[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if e := env.Body.(*protocol.ErrorMessage); e.Code != protocol.CodeInternal || *e.OriginatingID != j.body.UtteranceID {
		t.Errorf("error message %+v", e)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		s, err := js.Stream(t.Context(), bus.StreamASRJobs)
		return err == nil && s.CachedInfo().State.Msgs == 0
	}, "job terminated")
}

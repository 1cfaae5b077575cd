package asr_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/asr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testUser  = "user-1"
	testTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpan  = "00f067aa0ba902b7"
)

// harness is a real JetStream server; asr replicas, each pointed at a fake
// Whisper, are started on it by each test.
type harness struct {
	t  testing.TB
	ns *server.Server
	nc *nats.Conn
	js jetstream.JetStream
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(t.Context(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, ns: ns, nc: nc, js: js}
}

// config is an asr configuration for tests: quick retries and timeouts.
func (h *harness) config(fake *fakeopenai.Server) asr.Config {
	cfg := asr.DefaultConfig()
	cfg.NATSURL, cfg.URL = h.ns.ClientURL(), fake.URL()
	cfg.Timeout, cfg.RetryBackoff, cfg.AckWait, cfg.PullWait = 2*time.Second, 5*time.Millisecond, 2*time.Second, 100*time.Millisecond
	return cfg
}

// replica runs an asr service until the test ends or stop is called.
func (h *harness) replica(cfg asr.Config) (stop func()) {
	h.t.Helper()
	svc := testkit.Go(h.t, "asr", func(ctx context.Context) error { return asr.Run(ctx, cfg, testkit.Log()) })
	testkit.EventuallyNoError(h.t, 10*time.Second, func() error {
		_, err := h.js.Consumer(context.Background(), bus.StreamASRJobs, cfg.Consumer)
		return err
	}, "asr consumer")
	return svc.Stop
}

// waiting is how many pull requests the asr consumer holds: each idle
// worker slot of each replica has one.
func (h *harness) waiting() int {
	c, err := h.js.Consumer(context.Background(), bus.StreamASRJobs, "asr")
	if err != nil {
		return 0
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.NumWaiting
}

// speech is d of a voice-like sound at 16 kHz (a harmonic series at 140 Hz).
func speech(d time.Duration) []byte {
	const rate = 16000
	s := make([]int16, int(d*rate/time.Second))
	for i := range s {
		v := 0.0
		for k := 1.0; k <= 6; k++ {
			v += math.Sin(2*math.Pi*140*k*float64(i)/rate) / k
		}
		s[i] = int16(4000 * v)
	}
	return audio.Bytes(s)
}

// utterance makes the jobs of one utterance of a conversation.
type utterance struct {
	cid, id string
	seq     int32
}

func newUtterance(cid string) *utterance { return &utterance{cid: cid, id: protocol.NewID("am")} }

// job is the next job of the utterance carrying d of speech.
func (u *utterance) job(final bool, d time.Duration) *protocol.ASRJob {
	u.seq++
	j := &protocol.ASRJob{ID: protocol.NewID("aj"), UtteranceID: u.id, ConversationID: u.cid, Sequence: u.seq,
		Final: final, Format: audio.PCMFormat(16000), Data: speech(d), DurationMs: int32(d.Milliseconds()),
		CreatedAt: time.Now().UnixMilli(), Language: protocol.Ptr("en"), Prompt: protocol.Ptr("Earlier: good morning.")}
	if final {
		j.SpeechEndMs = protocol.Ptr(time.Now().UnixMilli())
	}
	return j
}

// publish puts a job on the ASR queue as the room-agent does, with the
// user and a trace in meta, and returns its ASR_JOBS sequence.
func (h *harness) publish(j *protocol.ASRJob) uint64 {
	h.t.Helper()
	env := protocol.New(j.ConversationID, j)
	env.Meta = map[string]any{edge.MetaUserID: testUser, telemetry.MetaTraceID: testTrace, telemetry.MetaSpanID: testSpan}
	data, err := protocol.Encode(env)
	if err != nil {
		h.t.Fatal(err)
	}
	ack, err := h.js.Publish(context.Background(), subjects.ASRJob(j.ConversationID), data)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// stored is an envelope as JetStream keeps it.
// stored is one envelope of a conversation, in stream order.
type stored = natstest.Seen

// recorder reads what was stored for one conversation, in stream order
// (duplicates JetStream refused are not there, as a client would see).
type recorder struct{ *natstest.Recorder }

func (h *harness) record(cid string) *recorder {
	h.t.Helper()
	return &recorder{natstest.Record(h.t, h.js, bus.StreamConversations, subjects.Conversation(cid))}
}

func (r *recorder) all() []stored { return r.All() }

func (r *recorder) transcriptions() []*protocol.Transcription {
	return natstest.Bodies[*protocol.Transcription](r.All())
}

func (r *recorder) userMessages() []stored {
	var out []stored
	for _, s := range r.all() {
		if _, ok := s.Env.Body.(*protocol.UserMessage); ok {
			out = append(out, s)
		}
	}
	return out
}

func (r *recorder) errors() []*protocol.ErrorMessage {
	return natstest.Bodies[*protocol.ErrorMessage](r.All())
}

// final returns the final transcription, or nil.
func (r *recorder) final() *protocol.Transcription {
	for _, t := range r.transcriptions() {
		if t.Final {
			return t
		}
	}
	return nil
}

// queued is how many jobs wait in ASR_JOBS (taken but unacknowledged included).
func (h *harness) queued() uint64 {
	s, err := h.js.Stream(context.Background(), bus.StreamASRJobs)
	if err != nil {
		h.t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

func texts(ts []*protocol.Transcription) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Text)
	}
	return out
}

package tts_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/tts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness runs the tts service against an embedded NATS and a fake speech
// server, and records what it publishes.
type harness struct {
	t    testing.TB
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *bus.Publisher
	fake *fakeopenai.Server
	cfg  tts.Config
	// stopFirst stops the replica newHarness started.
	stopFirst func()

	// rec takes SpeechAudio, SentenceAudio and ErrorMessage in arrival
	// order.
	rec *natstest.Recorder
}

type received struct {
	env  protocol.Envelope
	body *protocol.SpeechAudio
	at   time.Time
}

func newHarness(t testing.TB, mutate func(*tts.Config)) *harness {
	t.Helper()
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	return startHarness(t, srv, nc, natstest.JetStream(t, nc), mutate)
}

// newHarnessWithUsers is newHarness on a server with the deployment's NATS
// users (pkg/natsauth): the tts logs in as its user, the test as admin.
func newHarnessWithUsers(t testing.TB) *harness {
	t.Helper()
	var users []natsserver.User
	for _, u := range natsauth.Users() {
		users = append(users, natsserver.User{Name: u.Name, Password: "pw-" + u.Name, Permissions: u.Permissions})
	}
	srv, err := natsserver.Start(natsserver.Options{URL: "nats://" + testkit.FreeAddr(t), StoreDir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc := natstest.Connect(t, srv, bus.Credentials{User: natsauth.Admin, Password: "pw-" + natsauth.Admin}.Option())
	return startHarness(t, srv, nc, natstest.JetStream(t, nc), func(c *tts.Config) {
		c.NATSAuth = bus.Credentials{User: natsauth.TTS, Password: "pw-" + natsauth.TTS}
	})
}

func startHarness(t testing.TB, srv *server.Server, nc *nats.Conn, js jetstream.JetStream, mutate func(*tts.Config)) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, nc: nc, js: js, pub: bus.NewPublisher(js), fake: fakeopenai.New(t)}
	h.cfg = tts.DefaultConfig()
	h.cfg.NATSURL = srv.ClientURL()
	h.cfg.URL = h.fake.URL()
	h.cfg.MaxAhead = 100
	h.cfg.RetryDelay = 10 * time.Millisecond
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.subscribe()
	h.stopFirst = h.startReplica(h.cfg)
	return h
}

// startReplica runs one tts replica until the test ends (or stop is called).
func (h *harness) startReplica(cfg tts.Config) (stop func()) {
	h.t.Helper()
	svc := testkit.Go(h.t, "tts.Run", func(ctx context.Context) error {
		return tts.Run(ctx, cfg, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	})
	stop = svc.Stop
	// The consumer delivers only what is published after it exists.
	testkit.EventuallyNoError(h.t, 10*time.Second, func() error {
		_, err := h.js.Consumer(context.Background(), bus.StreamConversations, cfg.Consumer)
		return err
	}, "tts consumer created")
	return stop
}

func (h *harness) subscribe() {
	h.rec = natstest.RecordCore(h.t, h.nc, subjects.AllAudioOut,
		subjects.AllOfType(subjects.OriginAgent, protocol.TypeSentenceAudio),
		subjects.AllOfType(subjects.OriginServer, protocol.TypeErrorMessage))
}

func (h *harness) publish(ctx context.Context, body protocol.Body, cid string) {
	h.t.Helper()
	var err error
	if _, ok := body.(*protocol.ControlStop); ok {
		_, err = h.pub.PublishOnBehalf(ctx, protocol.New(cid, body), "")
	} else {
		_, err = h.pub.PublishServer(ctx, protocol.New(cid, body), "")
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) startAnswer(cid, id string, kind *protocol.StartAnswerAnswerType) {
	h.publish(context.Background(), &protocol.StartAnswer{ID: id, PreviousID: "um_" + id, ConversationID: cid, AnswerType: kind}, cid)
}

func sentenceID(turn string, seq int32) string { return "ams_" + turn + "_" + string(rune('0'+seq)) }

func (h *harness) sentence(ctx context.Context, cid, turn string, seq int32, text string, final bool) {
	b := &protocol.AssistantSentence{ID: protocol.Ptr(sentenceID(turn, seq)), PreviousID: turn, ConversationID: cid, Sequence: seq, Text: text}
	if final {
		b.IsFinal = protocol.Ptr(true)
	}
	h.publish(ctx, b, cid)
}

func (h *harness) stop(cid string, target *string, kind protocol.ControlStopStopType) {
	h.publish(context.Background(), &protocol.ControlStop{ConversationID: cid, TargetID: target, StopType: &kind}, cid)
}

// speak publishes a whole voice turn.
func (h *harness) speak(cid, turn string, texts ...string) {
	h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	for i, text := range texts {
		h.sentence(context.Background(), cid, turn, int32(i+1), text, i == len(texts)-1)
	}
}

// audioOf returns the SpeechAudio of a turn, in arrival order.
func (h *harness) audioOf(turn string) []received {
	var out []received
	for _, s := range h.rec.All() {
		if b, ok := s.Env.Body.(*protocol.SpeechAudio); ok && b.MessageID == turn {
			out = append(out, received{env: s.Env, body: b, at: s.At})
		}
	}
	return out
}

func (h *harness) storedOf(turn string) []*protocol.SentenceAudio {
	var out []*protocol.SentenceAudio
	for _, a := range natstest.Bodies[*protocol.SentenceAudio](h.rec.All()) {
		if a.MessageID == turn {
			out = append(out, a)
		}
	}
	return out
}

func (h *harness) errors() []*protocol.ErrorMessage {
	return natstest.Bodies[*protocol.ErrorMessage](h.rec.All())
}

// waitSpoken waits for the last chunk of a turn's final sentence.
func (h *harness) waitSpoken(turn string, timeout time.Duration) []received {
	h.t.Helper()
	testkit.Eventually(h.t, timeout, func() bool {
		for _, r := range h.audioOf(turn) {
			if r.body.Last && r.body.FinalSentence != nil && *r.body.FinalSentence {
				return true
			}
		}
		return false
	}, "turn %s spoken to its end", turn)
	return h.audioOf(turn)
}

// sentences groups a turn's chunks by sentence sequence and checks that
// they arrived in order: sentences ascending, chunks 0..n, the last one
// marked last.
func sentences(t testing.TB, rs []received) map[int32][]byte {
	t.Helper()
	out := map[int32][]byte{}
	var seq, chunk int32 = 0, 0
	open := false
	for _, r := range rs {
		b := r.body
		switch {
		case open && b.Sequence == seq && b.Chunk == chunk:
		case !open && b.Sequence > seq && b.Chunk == 0:
			seq, open = b.Sequence, true
		default:
			t.Fatalf("out of order: sentence %d chunk %d after sentence %d chunk %d (open %v)", b.Sequence, b.Chunk, seq, chunk-1, open)
		}
		if b.Format != "pcm_s16le_24000" {
			t.Fatalf("format %q", b.Format)
		}
		out[b.Sequence] = append(out[b.Sequence], b.Data...)
		chunk = b.Chunk + 1
		if b.Last {
			open, chunk = false, 0
		}
	}
	return out
}

func samplesFor(text string) int {
	return int(fakeopenai.SpeechConfig{}.Duration(text, 1) * 24000 / time.Second)
}

func dbfs(pcm []byte) float64 { return audio.DBFS(audio.Samples(pcm)) }

package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// answering is a room (no LiveKit) whose tracker and player run on an
// in-process JetStream, playing turn am_t: sentence 1 of a second, then
// sentence 2 of 100 ms, the last.
type answering struct {
	r    *Room
	js   jetstream.JetStream
	wire *wire
}

const testTurn = "am_t"

func newAnswering(t *testing.T) *answering {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{BargeInWordsWait: 300 * time.Millisecond}.WithDefaults()
	r := &Room{cfg: cfg, d: Deps{NC: nc, JS: js, Log: zerolog.Nop(), Metrics: DefaultMetrics()}, cid: protocol.NewID("ac"),
		log: zerolog.Nop(), pub: bus.NewPublisher(js), ctx: ctx, cancel: cancel}
	r.turns = newTracker(r, newTurnMetrics(r.d.Metrics, nil))
	p, err := NewPlayer(r.turns.onPlay)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{}
	p.enc = w
	r.player = p
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	wg.Go(func() { r.turns.publishLoop(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The question ended (its voice.end_of_speech span) and each sentence's
	// audio comes with the span that synthesised it (tts.sentence), as
	// room.go notes them from the SpeechAudio's meta.
	r.turns.speechEnded("am_q", time.Now(), testSpans.endOfSpeech)
	r.turns.startAnswer(&protocol.StartAnswer{ID: testTurn, PreviousID: "am_q", ConversationID: r.cid})
	for seq := int32(1); seq <= 2; seq++ {
		r.turns.sentence(&protocol.AssistantSentence{ID: protocol.Ptr(testTurn + "_s" + string(rune('0'+seq))), PreviousID: testTurn,
			Sequence: seq, IsFinal: protocol.Ptr(seq == 2), ConversationID: r.cid})
		r.turns.sentenceAudio(testTurn+"_s"+string(rune('0'+seq)), testSpans.sentence[seq])
	}
	for c := int32(0); c < 10; c++ {
		p.Add(chunk(testTurn, 1, c, c == 9, false))
	}
	p.Add(chunk(testTurn, 2, 0, true, true))
	testkit.Eventually(t, 2*time.Second, func() bool { return len(w.frames()) >= 5 }, "the answer did not play")
	return &answering{r: r, js: js, wire: w}
}

// stored is what the room published on the conversation's stream, in order.
func (a *answering) stored(t *testing.T) []protocol.Envelope {
	t.Helper()
	return natstest.Stored(t, a.js, bus.StreamConversations, subjects.Conversation(a.r.cid))
}

// waitFor returns what was stored once done says it is enough.
func (a *answering) waitFor(t *testing.T, what string, done func([]protocol.Envelope) bool) []protocol.Envelope {
	t.Helper()
	var got []protocol.Envelope
	testkit.Eventually(t, 5*time.Second, func() bool {
		got = a.stored(t)
		return done(got)
	}, what)
	return got
}

func has(typ protocol.MessageType) func([]protocol.Envelope) bool {
	return func(envs []protocol.Envelope) bool { return count(envs, typ) > 0 }
}

func recorded(n int) func([]protocol.Envelope) bool {
	return func(envs []protocol.Envelope) bool { return len(playouts(envs)) == n }
}

// playouts are the SentencePlayout statuses stored, by sentence sequence.
func playouts(envs []protocol.Envelope) map[int32]protocol.SentencePlayoutStatus {
	out := map[int32]protocol.SentencePlayoutStatus{}
	for _, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok {
			out[p.Sequence] = p.Status
		}
	}
	return out
}

func count(envs []protocol.Envelope, typ protocol.MessageType) int {
	n := 0
	for _, e := range envs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// A barge-in pauses; the first words stop the answer: ControlStop, the cut
// sentence interrupted (with what was heard of it), the rest unplayed.
func TestBargeInWithWordsStopsTheAnswer(t *testing.T) {
	a := newAnswering(t)
	a.r.turns.bargeIn("am_u", time.Now())
	paused := len(a.wire.frames())
	if envs := a.stored(t); len(envs) != 0 {
		t.Fatalf("published %d envelopes before the speech had words", len(envs))
	}
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "wait"})
	envs := a.waitFor(t, "playout not recorded", recorded(2))
	if count(envs, protocol.TypeControlStop) != 1 {
		t.Fatal("no ControlStop")
	}
	cs := envs[0].Body.(*protocol.ControlStop)
	if *cs.TargetID != testTurn || *cs.StopType != protocol.ControlStopStopTypeSpeech {
		t.Fatalf("ControlStop %+v", cs)
	}
	got := playouts(envs)
	if got[1] != protocol.SentencePlayoutStatusInterrupted || got[2] != protocol.SentencePlayoutStatusUnplayed {
		t.Fatalf("playout %v", got)
	}
	for _, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.Sequence == 1 && time.Duration(p.PlayedMs)*time.Millisecond != time.Duration(paused)*frameDur {
			t.Fatalf("interrupted after %d ms, %d frames went out", p.PlayedMs, paused)
		}
	}
	if n := count(envs, protocol.TypeTurnEvent); n != 0 {
		t.Fatalf("%d TurnEvents", n)
	}
	if n := len(a.wire.frames()); n != paused {
		t.Fatalf("%d frames written after the barge-in", n-paused)
	}
}

// No words: the answer resumes from the start of the cut sentence and is
// played to its end; one TurnEvent false_interruption, no ControlStop.
func TestFalseInterruptionResumesTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name  string
		final *protocol.Transcription // nil: no transcript comes
	}{
		{"empty final transcript", &protocol.Transcription{ID: "am_u", Final: true}},
		{"no transcript within the wait", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAnswering(t)
			a.r.turns.bargeIn("am_u", time.Now())
			paused := len(a.wire.frames())
			a.r.turns.heard(&protocol.Transcription{ID: "am_u", Text: " "}) // a partial without words
			a.r.turns.speechEnded("am_u", time.Now(), trace.SpanContext{})
			if c.final != nil {
				a.r.turns.heard(c.final)
			}
			envs := a.waitFor(t, "no TurnEvent", has(protocol.TypeTurnEvent))
			ev := envs[0].Body.(*protocol.TurnEvent)
			if ev.Kind != protocol.TurnEventKindFalseInterruption || *ev.MessageID != testTurn || *ev.SentenceID != testTurn+"_s1" ||
				*ev.UtteranceID != "am_u" || *ev.Reason != "no_words" || len(userMeta(envs[0].Meta)) != 0 {
				t.Fatalf("TurnEvent %+v meta %v", ev, envs[0].Meta)
			}
			envs = a.waitFor(t, "the answer did not play to its end", recorded(2))
			if got := playouts(envs); got[1] != protocol.SentencePlayoutStatusPlayed || got[2] != protocol.SentencePlayoutStatusPlayed {
				t.Fatalf("playout %v", got)
			}
			if n := count(envs, protocol.TypeControlStop); n != 0 {
				t.Fatalf("%d ControlStops", n)
			}
			// Sentence 1 again whole (50 frames), then sentence 2 (5).
			if n := len(a.wire.frames()) - paused; n != 55 {
				t.Fatalf("%d frames after the pause, want 55", n)
			}
		})
	}
}

// While paused, more speech barges in: an empty transcript of the first
// does not resume while the second goes on, and the second's words stop
// the answer.
func TestSecondInterruptionKeepsThePause(t *testing.T) {
	a := newAnswering(t)
	a.r.turns.bargeIn("am_u1", time.Now())
	a.r.turns.bargeIn("am_u2", time.Now())
	a.r.turns.speechEnded("am_u1", time.Now(), trace.SpanContext{})
	a.r.turns.heard(&protocol.Transcription{ID: "am_u1", Final: true})
	a.r.turns.heard(&protocol.Transcription{ID: "am_u2", Text: "no wait"})
	envs := a.waitFor(t, "no ControlStop", has(protocol.TypeControlStop))
	// Records go out in order: a resumption would have come first.
	if n := count(envs, protocol.TypeTurnEvent); n != 0 {
		t.Fatalf("resumed while the second interruption went on (%d TurnEvents)", n)
	}
}

package agent

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"go.opentelemetry.io/otel/trace"
)

// Hands-free: speech over the answer that is not addressed to Alicia does
// not stop it, whatever its words: the answer resumes once its final
// transcript says not addressed, and nothing is recorded (no ControlStop,
// no TurnEvent). Addressed words stop it as any words do.
func TestUnaddressedSpeechKeepsTheAnswer(t *testing.T) {
	t.Run("not addressed", func(t *testing.T) {
		a := newAnswering(t, pausing)
		a.r.turns.bargeIn("am_u", time.Now())
		tr := &protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "so I told him", Addressed: protocol.Ptr(false)}
		a.specTranscript(t, tr)
		a.r.turns.speechEnded("am_u", time.Now(), trace.SpanContext{})
		final := *tr
		final.Final, final.Text = true, "so I told him it was fine"
		a.specTranscript(t, &final)
		envs := a.waitFor(t, "the answer did not play to its end", recorded(2))
		if got := playouts(envs); got[1] != protocol.SentencePlayoutStatusPlayed || got[2] != protocol.SentencePlayoutStatusPlayed {
			t.Fatalf("playout %v", got)
		}
		if n, m := count(envs, protocol.TypeControlStop), count(envs, protocol.TypeTurnEvent); n+m != 0 {
			t.Fatalf("%d ControlStops, %d TurnEvents for speech not addressed", n, m)
		}
	})
	t.Run("addressed", func(t *testing.T) {
		a := newAnswering(t, pausing)
		a.r.turns.bargeIn("am_u", time.Now())
		a.specTranscript(t, &protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "Alicia, stop", Addressed: protocol.Ptr(true)})
		envs := a.waitFor(t, "no ControlStop", has(protocol.TypeControlStop))
		if cs := envs[0].Body.(*protocol.ControlStop); *cs.TargetID != testTurn {
			t.Fatalf("ControlStop %+v", cs)
		}
	})
}

// specTranscript delivers tr as the asr sends it on core NATS to both of
// the room's routes.
func (a *answering) specTranscript(t *testing.T, tr *protocol.Transcription) {
	t.Helper()
	env := protocol.New(a.r.cid, tr)
	in := bus.Inbound{Conversation: a.r.cid}
	if err := a.r.onSpecTranscript(context.Background(), env, tr, in); err != nil {
		t.Fatal(err)
	}
	if err := a.r.turns.onSpecTranscript(context.Background(), env, tr, in); err != nil {
		t.Fatal(err)
	}
}

// A hands-free utterance's audio record waits for its final transcript:
// published when it is addressed, dropped when not.
func TestHeldAudioRecord(t *testing.T) {
	a := newAnswering(t)
	published := map[string]int{}
	for _, utt := range []string{"am_yes", "am_no"} {
		a.r.turns.held.hold(utt, func() { published[utt]++ })
	}
	a.specTranscript(t, &protocol.Transcription{ID: "am_no", Final: true, Text: "never mind", Addressed: protocol.Ptr(false)})
	a.r.addressed(&protocol.Transcription{ID: "am_yes", Final: true, Text: "Alicia, hi", Addressed: protocol.Ptr(true)})
	a.r.addressed(&protocol.Transcription{ID: "am_no", Final: true})
	if published["am_yes"] != 1 || published["am_no"] != 0 {
		t.Fatalf("published %v; want am_yes once, am_no never", published)
	}
	if a.r.turns.held.take("am_no") != nil || a.r.turns.held.take("am_yes") != nil {
		t.Fatal("records still held after their final transcripts")
	}
	// The participants are told, without the words, on the data channel.
	for {
		select {
		case frame := <-a.r.turns.marks:
			env, err := protocol.Decode(frame)
			if err != nil {
				t.Fatal(err)
			}
			tr, ok := env.Body.(*protocol.Transcription)
			if !ok {
				continue // a playout mark
			}
			if tr.ID != "am_no" || !tr.Final || tr.Addressed == nil || *tr.Addressed || tr.Text != "" {
				t.Fatalf("data channel: %+v", tr)
			}
			return
		default:
			t.Fatal("the participants were not told the speech was not addressed")
		}
	}
}

// A speculation whose transcript was not addressed started no answer: when
// the person speaks again nothing is cancelled, and nothing of it (a
// TurnEvent with its words) reaches the stream; an addressed one's
// cancellation goes out as before.
func TestUnaddressedSpeculationCancelsNothing(t *testing.T) {
	a := newAnswering(t)
	noop := trace.SpanFromContext(context.Background())
	aside := &speculation{jobID: "aj_aside", utt: "am_aside", span: noop, done: make(chan struct{})}
	aside.resolve("so I told him", nil, true)
	asked := &speculation{jobID: "aj_asked", utt: "am_asked", span: noop, done: make(chan struct{})}
	asked.resolve("Alicia, what time", nil, false)
	a.r.cancelPreempt(aside, "speech_resumed", time.Now())
	a.r.cancelPreempt(asked, "speech_resumed", time.Now())
	envs := a.waitFor(t, "no TurnEvent", has(protocol.TypeTurnEvent))
	var events []*protocol.TurnEvent
	for _, e := range envs {
		if ev, ok := e.Body.(*protocol.TurnEvent); ok {
			events = append(events, ev)
		}
	}
	if len(events) != 1 || *events[0].UtteranceID != "am_asked" || *events[0].Transcript != "Alicia, what time" {
		t.Fatalf("TurnEvents %+v; want the addressed speculation's only", events)
	}
}

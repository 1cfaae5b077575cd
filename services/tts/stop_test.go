package tts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func TestStopCancelsTheTurn(t *testing.T) {
	cases := []struct {
		name     string
		kind     protocol.ControlStopStopType
		targeted bool
	}{
		{"barge-in (speech, targeted)", protocol.ControlStopStopTypeSpeech, true},
		{"stop all, no target", protocol.ControlStopStopTypeAll, false},
		{"stop generation, targeted", protocol.ControlStopStopTypeGeneration, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			// Slow synthesis: a chunk every 50 ms, so the first sentence is
			// still streaming when the stop comes.
			h.fake.SetSpeechFault(fakeopenai.Fault{ChunkDelay: 50 * time.Millisecond})
			cid, turn := "ac_stop", "am_stop"
			h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
			long := strings.Repeat("A long sentence that takes a while. ", 3)
			h.sentence(context.Background(), cid, turn, 1, long, false)
			h.sentence(context.Background(), cid, turn, 2, "Pending sentence two.", false)
			h.sentence(context.Background(), cid, turn, 3, "Pending sentence three.", false)
			testkit.Eventually(t, 10*time.Second, func() bool { return len(h.audioOf(turn)) >= 2 }, "first chunks")
			var target *string
			if c.targeted {
				target = &turn
			}
			h.stop(cid, target, c.kind)
			stopped := time.Now()
			// The llm may go on after a speech stop: those sentences are not spoken either.
			h.sentence(context.Background(), cid, turn, 4, "After the stop.", true)

			// Another conversation is spoken meanwhile: the replica is not stuck.
			h.fake.SetSpeechFault(fakeopenai.Fault{})
			h.speak("ac_other", "am_other", "Still here.")
			h.waitSpoken("am_other", 10*time.Second)

			rs := h.audioOf(turn)
			full := samplesFor(long) * 2
			var got int
			for _, r := range rs {
				if r.body.Sequence != 1 {
					t.Fatalf("sentence %d spoken after the stop", r.body.Sequence)
				}
				if r.at.After(stopped.Add(100 * time.Millisecond)) {
					t.Fatalf("chunk %d arrived %v after the stop", r.body.Chunk, r.at.Sub(stopped))
				}
				got += len(r.body.Data)
			}
			if got >= full {
				t.Fatalf("sentence 1 played whole (%d bytes) despite the stop", got)
			}
			for _, r := range h.fake.SpeechRequests() {
				if strings.HasPrefix(r.Input, "Pending") || r.Input == "After the stop." {
					t.Fatalf("%q was synthesised after the stop", r.Input)
				}
			}
			if n := len(h.storedOf(turn)); n != 0 {
				t.Fatalf("%d SentenceAudio for a stopped sentence", n)
			}
		})
	}
}

// TestStopBeforeTheTurnIsTaken: a stop published right after the
// StartAnswer holds even when it reaches the service first.
func TestStopBeforeTheFirstSentence(t *testing.T) {
	h := newHarness(t, nil)
	cid, turn := "ac_early", "am_early"
	h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	h.stop(cid, nil, protocol.ControlStopStopTypeSpeech)
	h.sentence(context.Background(), cid, turn, 1, "Never said.", true)
	h.speak("ac_other", "am_other", "Still here.")
	h.waitSpoken("am_other", 10*time.Second)
	if n := len(h.audioOf(turn)); n != 0 {
		t.Fatalf("%d chunks of a stopped turn", n)
	}
}

// TestStopStoredBeforeAReplicaRuns: stops stored while no replica ran are
// read when a replica takes the turns: the turn a stop names is not spoken,
// also when a later stop names another answer (the last stop alone does not
// tell); a turn no stop names is.
func TestStopStoredBeforeAReplicaRuns(t *testing.T) {
	h := newHarness(t, nil)
	h.stopFirst()
	cid := "ac_stored"
	h.startAnswer(cid, "am_first", protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	h.sentence(context.Background(), cid, "am_first", 1, "Stopped before anyone spoke it.", true)
	h.stop(cid, protocol.Ptr("am_first"), protocol.ControlStopStopTypeSpeech)
	h.stop(cid, protocol.Ptr("am_elsewhere"), protocol.ControlStopStopTypeSpeech)
	h.speak("ac_kept", "am_kept", "Not stopped.")
	h.startReplica(h.cfg)
	h.waitSpoken("am_kept", 10*time.Second)
	if n := len(h.audioOf("am_first")); n != 0 {
		t.Fatalf("%d chunks of a stopped turn", n)
	}
}

// TestTurnReadersAreDeleted: the consumers a turn reads its sentences and
// stops through are gone once the turns are over.
func TestTurnReadersAreDeleted(t *testing.T) {
	h := newHarness(t, nil)
	h.stopFirst()
	h.speak("ac_r1", "am_r1", texts...)
	h.startAnswer("ac_r2", "am_r2", protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	h.stop("ac_r2", protocol.Ptr("am_r2"), protocol.ControlStopStopTypeSpeech)
	h.stop("ac_r2", protocol.Ptr("am_r0"), protocol.ControlStopStopTypeSpeech)
	h.startReplica(h.cfg)
	h.waitSpoken("am_r1", 10*time.Second)
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		st, err := h.js.Stream(context.Background(), bus.StreamConversations)
		if err != nil {
			return err
		}
		names := st.ConsumerNames(context.Background())
		var left []string
		for n := range names.Name() {
			if n != h.cfg.Consumer {
				left = append(left, n)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("consumers left: %v", left)
		}
		return names.Err()
	}, "only the durable consumer")
}

// TestTurnsUnderTheTTSUser: with the deployment's NATS users, the tts
// (logged in as its user) reads a turn stored before it ran, its sentences
// and its stops, through the consumers its user may create.
func TestTurnsUnderTheTTSUser(t *testing.T) {
	h := newHarnessWithUsers(t)
	h.stopFirst()
	h.startAnswer("ac_auth", "am_stopped", protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	h.sentence(context.Background(), "ac_auth", "am_stopped", 1, "Never said.", true)
	h.stop("ac_auth", protocol.Ptr("am_stopped"), protocol.ControlStopStopTypeSpeech)
	h.stop("ac_auth", protocol.Ptr("am_elsewhere"), protocol.ControlStopStopTypeSpeech)
	h.speak("ac_auth2", "am_spoken", texts...)
	h.startReplica(h.cfg)
	got := sentences(t, h.waitSpoken("am_spoken", 10*time.Second))
	if len(got) != len(texts) {
		t.Fatalf("%d sentences spoken, want %d", len(got), len(texts))
	}
	if n := len(h.audioOf("am_stopped")); n != 0 {
		t.Fatalf("%d chunks of a stopped turn", n)
	}
}

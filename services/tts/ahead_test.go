package tts_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/tts"
	"github.com/alicia-voice/alicia/services/tts/internal/metrics"
)

// slowSpeech makes a synthesis take long enough that a sentence published
// right after its synthesis ahead began finds it still streaming.
var slowSpeech = fakeopenai.Profile{Speech: fakeopenai.SpeechTiming{TimeToFirstAudio: 200 * time.Millisecond, RealTimeFactor: 0.5}}

// specSpeak publishes what the llm sends ahead: a preemptive answer's
// first sentence, its answer id not known yet.
func (h *harness) specSpeak(cid, text string) {
	h.t.Helper()
	data, err := protocol.Encode(protocol.New(cid, &protocol.AssistantSentence{ConversationID: cid, Sequence: 1, Text: text}))
	if err != nil {
		h.t.Fatal(err)
	}
	// Core NATS: published before the replica's queue subscription is in
	// place, the message is lost (seen on a loaded -race run).
	subj := subjects.SpecSpeak(cid)
	testkit.Eventually(h.t, 10*time.Second, func() bool { return h.srv.GlobalAccount().SubscriptionInterest(subj) }, "a tts replica subscribed to %s", subj)
	if err := h.nc.Publish(subj, data); err != nil {
		h.t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
}

// turnEvent publishes the room-agent's TurnEvent of a kind.
func (h *harness) turnEvent(cid string, kind protocol.TurnEventKind) {
	h.t.Helper()
	ev := &protocol.TurnEvent{ConversationID: cid, Kind: kind, Timestamp: time.Now().UnixMilli()}
	if _, err := h.pub.PublishAgent(context.Background(), protocol.New(cid, ev), ""); err != nil {
		h.t.Fatal(err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func aheadCount(outcome string) float64 {
	return testutil.ToFloat64(metrics.Default().Ahead.WithLabelValues(outcome))
}

func backendOK() float64 {
	return testutil.ToFloat64(metrics.Default().BackendRequests.WithLabelValues("openai:kokoro", "ok"))
}

// requestsFor counts the backend's speech requests for text.
func (h *harness) requestsFor(text string) int {
	n := 0
	for _, r := range h.fake.SpeechRequests() {
		if r.Input == text {
			n++
		}
	}
	return n
}

// chunkShape is what a SpeechAudio chunk says besides its ids and timing.
type chunkShape struct {
	seq, chunk int32
	bytes      int
	last       bool
	final      bool
	format     string
}

func shapes(t *testing.T, cid, turn string, rs []received) []chunkShape {
	t.Helper()
	var out []chunkShape
	for _, r := range rs {
		b := r.body
		if b.ConversationID != cid || b.MessageID != turn || b.SentenceID != sentenceID(turn, b.Sequence) || b.SynthStartMs == nil {
			t.Fatalf("chunk %+v of turn %s", b, turn)
		}
		out = append(out, chunkShape{b.Sequence, b.Chunk, len(b.Data), b.Last, b.FinalSentence != nil && *b.FinalSentence, b.Format})
	}
	return out
}

// TestSentenceSpokenAheadIsUsed: a sentence synthesised ahead and then
// published as a turn's first sentence costs no second backend request,
// and the turn publishes the same SpeechAudio and SentenceAudio as a turn
// whose sentence was not synthesised ahead.
func TestSentenceSpokenAheadIsUsed(t *testing.T) {
	cases := []struct {
		name  string
		users bool
		slow  bool // the synthesis ahead is still streaming when the turn takes it
		noise bool // TurnEvents that must not drop the entry come first
	}{
		{"synthesised ahead", false, false, false},
		{"still streaming when the sentence comes", false, true, false},
		{"other conversations' cancellations and other events keep it", false, false, true},
		{"under the tts's NATS user", true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h *harness
			if c.users {
				h = newHarnessWithUsers(t)
			} else {
				h = newHarness(t, nil)
			}
			if c.slow {
				h.fake.SetProfile(slowSpeech)
			}
			cid, turn := "ac_ahead", "am_ahead"
			used, ok := aheadCount("used"), backendOK()
			h.specSpeak(cid, texts[1])
			testkit.Eventually(t, 10*time.Second, func() bool { return h.fake.SpeechCount() == 1 }, "the synthesis ahead reaches the backend")
			if !c.slow {
				testkit.Eventually(t, 10*time.Second, func() bool { return backendOK() == ok+1 }, "the synthesis ahead over")
			}
			if c.noise {
				cancelled := aheadCount("cancelled")
				h.specSpeak("ac_probe", "A probe.")
				testkit.Eventually(t, 10*time.Second, func() bool { return h.fake.SpeechCount() == 2 }, "the probe's synthesis ahead")
				h.turnEvent(cid, protocol.TurnEventKindFalseInterruption)
				h.turnEvent("ac_elsewhere", protocol.TurnEventKindPreemptCancelled)
				// The events reach the service in order: once the probe's
				// cancellation is handled, so are the two before it.
				h.turnEvent("ac_probe", protocol.TurnEventKindPreemptCancelled)
				testkit.Eventually(t, 10*time.Second, func() bool { return aheadCount("cancelled") >= cancelled+1 }, "the probe cancelled")
			}
			if n := len(h.audioOf(turn)); n != 0 {
				t.Fatalf("%d SpeechAudio before the sentence was published", n)
			}
			h.speak(cid, turn, texts[1], texts[2])
			got := h.waitSpoken(turn, 10*time.Second)

			ref, refTurn := "ac_reference", "am_reference"
			h.speak(ref, refTurn, texts[1], texts[2])
			want := h.waitSpoken(refTurn, 10*time.Second)

			gotPCM, wantPCM := sentences(t, got), sentences(t, want)
			for seq := int32(1); seq <= 2; seq++ {
				if len(gotPCM[seq]) != 2*samplesFor(texts[seq]) || !bytes.Equal(gotPCM[seq], wantPCM[seq]) {
					t.Fatalf("sentence %d: %d bytes, not those of the reference turn (%d bytes)", seq, len(gotPCM[seq]), len(wantPCM[seq]))
				}
			}
			gs, ws := shapes(t, cid, turn, got), shapes(t, ref, refTurn, want)
			if fmt.Sprint(gs) != fmt.Sprint(ws) {
				t.Fatalf("chunks %v\nwant %v", gs, ws)
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(h.storedOf(turn)) == 2 && len(h.storedOf(refTurn)) == 2 }, "SentenceAudio")
			for i, a := range h.storedOf(turn) {
				w := *h.storedOf(refTurn)[i]
				w.ConversationID, w.MessageID, w.SentenceID = cid, turn, sentenceID(turn, w.Sequence)
				if !reflect.DeepEqual(*a, w) {
					t.Fatalf("SentenceAudio %+v (engine %q)\nwant %+v (engine %q)", *a, deref(a.Engine), w, deref(w.Engine))
				}
			}
			if n := h.requestsFor(texts[1]); n != 2 {
				t.Fatalf("%d requests for the first sentence, want 2 (ahead, then the reference turn)", n)
			}
			if n := h.requestsFor(texts[2]); n != 2 {
				t.Fatalf("%d requests for the second sentence, want 2", n)
			}
			if d := aheadCount("used") - used; d != 1 {
				t.Fatalf("ahead used %v times, want 1", d)
			}
		})
	}
}

// TestAheadEntryDropped: an entry that will not be used is dropped, and a
// later turn whose first sentence has the same text synthesises it anew.
func TestAheadEntryDropped(t *testing.T) {
	cases := []struct {
		name    string
		slow    bool
		ttl     time.Duration
		outcome string
		drop    func(h *harness, cid string)
	}{
		{"preempt_cancelled while synthesising", true, 0, "cancelled", func(h *harness, cid string) {
			h.turnEvent(cid, protocol.TurnEventKindPreemptCancelled)
		}},
		{"preempt_cancelled once synthesised", false, 0, "cancelled", func(h *harness, cid string) {
			h.turnEvent(cid, protocol.TurnEventKindPreemptCancelled)
		}},
		{"the answer begins with another sentence", false, 0, "mismatch", func(h *harness, cid string) {
			h.speak(cid, "am_other", "Something else.")
			h.waitSpoken("am_other", 10*time.Second)
		}},
		{"expired", false, 200 * time.Millisecond, "expired", func(*harness, string) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *tts.Config) {
				if c.ttl > 0 {
					cfg.AheadTTL = c.ttl
				}
			})
			if c.slow {
				h.fake.SetProfile(slowSpeech)
			}
			cid, turn := "ac_drop", "am_drop"
			used, dropped, ok := aheadCount("used"), aheadCount(c.outcome), backendOK()
			h.specSpeak(cid, texts[0])
			testkit.Eventually(t, 10*time.Second, func() bool { return h.fake.SpeechCount() == 1 }, "the synthesis ahead reaches the backend")
			if !c.slow {
				testkit.Eventually(t, 10*time.Second, func() bool { return backendOK() == ok+1 }, "the synthesis ahead over")
			}
			c.drop(h, cid)
			testkit.Eventually(t, 10*time.Second, func() bool { return aheadCount(c.outcome) == dropped+1 }, "entry dropped (%s)", c.outcome)
			if c.slow && backendOK() != ok {
				t.Fatalf("the cancelled synthesis ahead ran to its end")
			}

			h.speak(cid, turn, texts[0])
			got := sentences(t, h.waitSpoken(turn, 10*time.Second))
			if len(got[1]) != 2*samplesFor(texts[0]) || dbfs(got[1]) < -40 {
				t.Fatalf("sentence: %d bytes, %.1f dBFS", len(got[1]), dbfs(got[1]))
			}
			if n := h.requestsFor(texts[0]); n != 2 {
				t.Fatalf("%d requests for the sentence, want 2 (ahead, then the turn's own)", n)
			}
			if d := aheadCount("used") - used; d != 0 {
				t.Fatalf("a dropped entry was used %v times", d)
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(h.storedOf(turn)) == 1 }, "SentenceAudio")
		})
	}
}

// TestNothingAheadIsPublished: a sentence synthesised ahead and never
// confirmed leaves no envelope anywhere, only its expiry in the metrics.
func TestNothingAheadIsPublished(t *testing.T) {
	h := newHarness(t, func(c *tts.Config) { c.AheadTTL = 300 * time.Millisecond })
	cid := "ac_unconfirmed"
	var mu sync.Mutex
	var seen []string
	sub, err := h.nc.Subscribe("alicia.>", func(m *nats.Msg) {
		if strings.Contains(m.Subject, cid) && m.Subject != subjects.SpecSpeak(cid) {
			mu.Lock()
			seen = append(seen, m.Subject)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	expired, ok := aheadCount("expired"), backendOK()
	h.specSpeak(cid, texts[1])
	testkit.Eventually(t, 10*time.Second, func() bool { return backendOK() == ok+1 }, "the synthesis ahead over")
	testkit.Eventually(t, 10*time.Second, func() bool { return aheadCount("expired") == expired+1 }, "the entry expired")
	// A turn spoken after it is a barrier: whatever the service published
	// before it has arrived.
	h.speak("ac_barrier", "am_barrier", texts[0])
	h.waitSpoken("am_barrier", 10*time.Second)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(h.storedOf("am_barrier")) == 1 }, "SentenceAudio")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("published for a sentence never confirmed: %v", seen)
	}
	if h.fake.SpeechCount() != 2 {
		t.Fatalf("%d speech requests, want 2", h.fake.SpeechCount())
	}
}

package voice_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// falseInterruptions reads the conversation's TurnEvents false_interruption
// from the stream; one with meta (which would make a row) fails the test.
func falseInterruptions(t testing.TB, s *stack, cid string) []*protocol.TurnEvent {
	t.Helper()
	var out []*protocol.TurnEvent
	for _, env := range s.stream(t, cid) {
		if ev, ok := env.Body.(*protocol.TurnEvent); ok && ev.Kind == protocol.TurnEventKindFalseInterruption {
			if len(env.Meta) != 0 {
				t.Fatalf("TurnEvent with meta %v", env.Meta)
			}
			out = append(out, ev)
		}
	}
	return out
}

// noiseBurst is d of white noise at about -20 dBFS, 16 kHz: a cough, a
// door, a burst of static on the microphone.
func noiseBurst(d time.Duration, seed uint64) []int16 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	out := make([]int16, int(d.Seconds()*16000))
	for i := range out {
		out[i] = int16((r.Float64()*2 - 1) * 5000)
	}
	return out
}

// counter is the value of a counter on the default registry.
func counter(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}

// TestFalseInterruptionResumes: with the energy VAD and the pause setting,
// the user's microphone picks up a burst of noise over the answer, long
// enough to barge in. The agent's audio stops
// at once, but the noise has no words (its final transcript is empty), so
// the answer is not dropped: playout resumes from the start of the sentence
// it cut, every sentence ends up played, no ControlStop goes out, and a
// TurnEvent false_interruption (no meta: no row) is on the stream.
func TestFalseInterruptionResumes(t *testing.T) {
	const bargeMin = 200 * time.Millisecond
	answer := "The forecast for Paris tomorrow is mostly sunny with a few clouds. " +
		"Temperatures will climb to about twenty degrees. In the evening the sky stays clear."
	// The energy VAD takes the noise for speech (the neural one does not:
	// TestNoiseDuringAnAnswer), and the barge-in pauses rather than lowers.
	s := newStack(t, options{answer: answer, agent: func(c *roomagent.Config) {
		c.BargeInMin, c.VAD, c.BargeInDuckDB = bargeMin, roomagent.VADEnergy, -100
	}})
	s.speech.SetTranscriber(fakeopenai.NoWordsInNoise(nil))
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)

	u.Say(voiceclient.Speech(t, "Tell me about the weather in Paris."))
	sa := u.WaitFor(20*time.Second, "no StartAnswer", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	testkit.Eventually(t, 20*time.Second, func() bool {
		n, _, _ := voiceclient.Loud(u.Heard(), time.Time{})
		// A second and a half of the agent's voice: past the echo
		// canceller's first second, when a frame quieter than the answer
		// is taken for its echo.
		return n >= 75
	}, "the agent never spoke")

	falseBefore := counter(t, "alicia_voice_false_interruptions_total")
	u.WaitSent()
	interrupt := time.Now()
	u.Say(noiseBurst(400*time.Millisecond, 1))

	// The TurnEvent: which sentence was cut, how long playout waited.
	ctx := context.Background()
	st, err := s.js.Stream(ctx, "CONVERSATIONS")
	if err != nil {
		t.Fatal(err)
	}
	var ev *protocol.TurnEvent
	testkit.EventuallyNoError(t, 15*time.Second, func() error {
		evs := falseInterruptions(t, s, cid)
		if len(evs) != 1 {
			return errorf("%d false interruptions", len(evs))
		}
		ev = evs[0]
		return nil
	}, "no TurnEvent false_interruption")
	if ev.Kind != protocol.TurnEventKindFalseInterruption || ev.MessageID == nil || *ev.MessageID != sa.ID ||
		ev.Reason == nil || *ev.Reason != "no_words" || ev.UtteranceID == nil || ev.HeldMs == nil || *ev.HeldMs < 300 || ev.SentenceID == nil {
		t.Fatalf("TurnEvent %+v", ev)
	}
	if got := counter(t, "alicia_voice_false_interruptions_total"); got != falseBefore+1 {
		t.Fatalf("false interruptions %v, want %v", got, falseBefore+1)
	}

	// Every sentence is played, the cut one from its start again: its
	// playing mark came twice.
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var all, played int
		if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE playout_status = 'played')
			FROM alicia_sentences WHERE message_id = $1`, sa.ID).Scan(&all, &played); err != nil {
			return err
		}
		if all != 3 || played != 3 {
			return errorf("%d sentences, %d played", all, played)
		}
		return nil
	}, "the answer was not played to its end")
	var resumed time.Time
	playing := 0
	envs, at := u.Received(), u.ReceivedAt()
	for i, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.SentenceID == *ev.SentenceID && p.Status == protocol.SentencePlayoutStatusPlaying {
			playing++
			resumed = at[i]
		}
	}
	if playing != 2 {
		t.Fatalf("the cut sentence was marked playing %d times, want 2 (its start, its resumption)", playing)
	}
	// Silence from the barge-in (the noise's onset + bargeMin, plus audio in
	// flight and a loaded machine's scheduling: how fast it pauses is
	// BenchmarkBargeIn's figure) until playout resumed.
	limit := interrupt.Add(bargeMin + 400*time.Millisecond)
	for _, h := range u.Heard() {
		if h.At.After(limit) && h.At.Before(resumed.Add(-50*time.Millisecond)) && audio.DBFS(h.PCM) >= -45 {
			t.Fatalf("agent heard %v after the noise began, while paused (resumed at %v)", h.At.Sub(interrupt), resumed.Sub(interrupt))
		}
	}

	// Nothing stopped the answer.
	if _, err := st.GetLastMsgForSubject(ctx, subjects.Client(cid, protocol.TypeControlStop)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("ControlStop on the stream after a false interruption (err %v)", err)
	}
}

// speechOnset is the offset of the first 20 ms frame of pcm (16 kHz) above
// -40 dBFS: where espeak-ng's leading silence ends.
func speechOnset(pcm []int16) time.Duration {
	for off := 0; off+320 <= len(pcm); off += 320 {
		if audio.DBFS(pcm[off:off+320]) > -40 {
			return audio.FramesDuration(off, 16000)
		}
	}
	return 0
}

// lastHeard is when the last piece of agent audio above -70 dBFS (any of
// the agent's voice, the quiet between words too) arrived within [from, to).
func lastHeard(h []voiceclient.Heard, from, to time.Time) (time.Time, bool) {
	var last time.Time
	for _, x := range h {
		if !x.At.Before(from) && x.At.Before(to) && audio.DBFS(x.PCM) > -70 {
			last = x.At
		}
	}
	return last, !last.IsZero()
}

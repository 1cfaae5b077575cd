package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// wire stands for the agent's track: it records each frame the player
// writes, with its peak level (each test turn has its own).
type wire struct {
	mu    sync.Mutex
	peaks []int
}

func (w *wire) WriteSample(s media.PCM16Sample) error {
	peak := 0
	for _, v := range s {
		peak = max(peak, int(v), -int(v))
	}
	w.mu.Lock()
	w.peaks = append(w.peaks, peak)
	w.mu.Unlock()
	return nil
}
func (w *wire) SampleRate() int { return playRate }
func (w *wire) String() string  { return "wire" }
func (w *wire) Close() error    { return nil }

func (w *wire) frames() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.peaks...)
}

// loudChunk is 100 ms (5 frames) of 24 kHz audio at level amp.
func loudChunk(turn string, seq, idx int32, amp int16, last, final bool) *protocol.SpeechAudio {
	sa := chunk(turn, seq, idx, last, final)
	pcm := make([]int16, 2400)
	for i := range pcm {
		pcm[i] = amp * int16(1-2*((i/20)%2))
	}
	sa.Data = audio.Bytes(pcm)
	return sa
}

func startPlayerOn(t *testing.T) (*Player, *events, *wire) {
	t.Helper()
	ev := &events{}
	p, err := NewPlayer(ev.add)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{}
	p.enc = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, ev, w
}

// After Stop or Pause returns, not one more frame of the cut turn is
// written, whenever in the 20 ms between two frames the decision falls.
func TestPlayerWritesNothingAfterTheDecision(t *testing.T) {
	p, _, w := startPlayerOn(t)
	const cut, other = 4000, 12000 // peak levels of the cut turns and of the turn played after
	for i := range 24 {
		turn := "am_cut" + string(rune('a'+i))
		for c := int32(0); c < 4; c++ {
			p.Add(loudChunk(turn, 1, c, cut, c == 3, true))
		}
		before := len(w.frames())
		played := i%6 + 1 // frames of it played before the decision, from 1 to 6
		testkit.Eventually(t, 2*time.Second, func() bool { return len(w.frames()) >= before+played }, "turn did not play")
		// Spread decisions over the frame period.
		<-time.After(time.Duration(i%5) * 4 * time.Millisecond)
		if i%2 == 0 {
			p.Stop(turn)
		} else {
			p.Pause()
			p.Stop(turn) // a confirmed barge-in
		}
		at := len(w.frames())
		// The next turn plays: every frame after the decision is its own.
		next := "am_next" + string(rune('a'+i))
		p.Add(loudChunk(next, 1, 0, other, true, true))
		testkit.Eventually(t, 2*time.Second, func() bool { return len(w.frames()) >= at+5 }, "the next turn did not play")
		for j, peak := range w.frames()[at:] {
			if peak < other/2 {
				t.Fatalf("round %d: frame %d after the decision is the cut turn's (peak %d)", i, j, peak)
			}
		}
	}
}

// A Pause stops the audio at once and keeps what comes meanwhile; Resume
// plays the cut sentence again from its first frame, then the rest, and
// tells each sentence's start again.
func TestPlayerPauseResumesFromTheSentenceStart(t *testing.T) {
	p, ev, w := startPlayerOn(t)
	// Sentence 1: 10 frames at 3000; sentence 2: 5 frames at 6000.
	p.Add(loudChunk("am_p", 1, 0, 3000, false, false))
	p.Add(loudChunk("am_p", 1, 1, 3000, true, false))
	testkit.Eventually(t, 2*time.Second, func() bool { return len(w.frames()) >= 4 }, "playout did not start")
	st := p.Pause()
	at := len(w.frames())
	if st.Turn != "am_p" || st.Seq != 1 || st.Sentence != "am_p_s1" || st.Played != time.Duration(at)*frameDur {
		t.Fatalf("paused %+v after %d frames", st, at)
	}
	if !p.Busy() {
		t.Fatal("not busy while paused with audio queued")
	}
	p.Add(loudChunk("am_p", 2, 0, 6000, true, true)) // the tts goes on
	<-time.After(100 * time.Millisecond)             // five frame periods
	if n := len(w.frames()); n != at {
		t.Fatalf("%d frames written while paused", n-at)
	}
	p.Resume()
	testkit.Eventually(t, 2*time.Second, func() bool { return len(ev.of(SentenceDone)) == 2 }, "did not play on")
	after := w.frames()[at:]
	if len(after) != 15 {
		t.Fatalf("%d frames after the resume, want sentence 1 whole (10) and sentence 2 (5)", len(after))
	}
	for j, peak := range after { // sentence 1 peaks at 3000, sentence 2 at 6000
		if (j < 10) != (peak < 4500) {
			t.Fatalf("frame %d after the resume has peak %d", j, peak)
		}
	}
	var starts []int32
	for _, e := range ev.of(SentenceStart) {
		starts = append(starts, e.Seq)
	}
	if len(starts) != 3 || starts[0] != 1 || starts[1] != 1 || starts[2] != 2 {
		t.Fatalf("sentence starts %v, want [1 1 2]", starts)
	}
	done := ev.of(SentenceDone)
	if done[0].Played != 200*time.Millisecond || done[1].Played != 100*time.Millisecond {
		t.Fatalf("played %v and %v, want the whole sentences", done[0].Played, done[1].Played)
	}
}

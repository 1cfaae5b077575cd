package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

type events struct {
	mu  sync.Mutex
	evs []PlayEvent
}

func (e *events) add(ev PlayEvent) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }
func (e *events) get() []PlayEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]PlayEvent(nil), e.evs...)
}

// of is the events of these kinds, in order.
func (e *events) of(kinds ...PlayKind) []PlayEvent {
	var out []PlayEvent
	for _, ev := range e.get() {
		for _, k := range kinds {
			if ev.Kind == k {
				out = append(out, ev)
			}
		}
	}
	return out
}

// chunk is 100 ms of 24 kHz audio of sentence seq of turn.
func chunk(turn string, seq, idx int32, last, final bool) *protocol.SpeechAudio {
	pcm := make([]int16, 2400)
	for i := range pcm {
		pcm[i] = int16(3000 * ((i / 20) % 2))
	}
	sa := &protocol.SpeechAudio{ConversationID: "ac_1", MessageID: turn, SentenceID: turn + "_s" + string(rune('0'+seq)), Sequence: seq,
		Chunk: idx, Format: audio.PCMFormat(24000), Data: audio.Bytes(pcm), Last: last}
	if final {
		sa.FinalSentence = protocol.Ptr(true)
	}
	return sa
}

func startPlayer(t *testing.T) (*Player, *events) {
	t.Helper()
	ev := &events{}
	p, err := NewPlayer(ev.add)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, ev
}

func TestPlayerOrdersSentencesAndChunks(t *testing.T) {
	p, ev := startPlayer(t)
	// Arrives out of order: sentence 2 before 1, chunk 1 before chunk 0.
	p.Add(chunk("am_a", 2, 0, true, true))
	p.Add(chunk("am_a", 1, 1, true, false))
	p.Add(chunk("am_a", 1, 0, false, false))
	testkit.Eventually(t, 3*time.Second, func() bool { return len(ev.of(FirstFrame, SentenceDone)) == 3 }, "sentences not played")
	got := ev.of(FirstFrame, SentenceDone)
	// Each sentence's start is told as its first frame goes out, before its end.
	all := ev.get()
	var order []string
	for _, e := range all {
		if e.Kind == SentenceStart || e.Kind == SentenceDone {
			order = append(order, fmt.Sprintf("%d:%d", e.Kind, e.Seq))
		}
	}
	if want := fmt.Sprintf("[%d:1 %d:1 %d:2 %d:2]", SentenceStart, SentenceDone, SentenceStart, SentenceDone); fmt.Sprint(order) != want {
		t.Fatalf("sentence starts and ends %v, want %s", order, want)
	}
	if got[0].Kind != FirstFrame || got[1].Kind != SentenceDone || got[1].Seq != 1 || got[2].Seq != 2 {
		t.Fatalf("events %+v", got)
	}
	if got[1].Played != 200*time.Millisecond || got[2].Played != 100*time.Millisecond {
		t.Fatalf("played %v and %v, want 200ms and 100ms", got[1].Played, got[2].Played)
	}
	// Real time: two sentences of 300 ms in all take about that long.
	if d := got[2].At.Sub(got[0].At); d < 240*time.Millisecond || d > 600*time.Millisecond {
		t.Fatalf("played 300 ms of audio in %v", d)
	}
}

func TestPlayerStopsAtOnce(t *testing.T) {
	p, ev := startPlayer(t)
	for i := int32(0); i < 10; i++ { // one second of sentence 1
		p.Add(chunk("am_b", 1, i, i == 9, false))
	}
	p.Add(chunk("am_b", 2, 0, true, true))
	testkit.Eventually(t, 2*time.Second, func() bool { return len(ev.of(FirstFrame)) == 1 }, "playout did not start")
	testkit.Eventually(t, 2*time.Second, func() bool { // let some of it play
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.played >= 200*time.Millisecond
	}, "sentence 1 did not play on")
	st := p.Stop("")
	if st.Turn != "am_b" || st.Seq != 1 || st.Played < 150*time.Millisecond || st.Played > 500*time.Millisecond {
		t.Fatalf("stopped %+v", st)
	}
	if p.Busy() {
		t.Fatal("busy after stop")
	}
	p.Add(chunk("am_b", 3, 0, true, true)) // late audio of the stopped turn
	// The next turn plays; had the late audio been taken, it would have
	// played first.
	p.Add(chunk("am_c", 1, 0, true, true))
	testkit.Eventually(t, 2*time.Second, func() bool {
		for _, e := range ev.get() {
			if e.Kind == SentenceDone && e.Turn == "am_c" {
				return true
			}
		}
		return false
	}, "next turn did not play")
	for _, e := range ev.get() {
		if e.Kind == SentenceDone && e.Turn == "am_b" {
			t.Fatalf("a stopped turn finished a sentence: %+v", e)
		}
	}
}

func TestPlayerTurnsInOrderAndSkipsMissing(t *testing.T) {
	p, ev := startPlayer(t)
	p.Add(chunk("am_d", 1, 0, true, false))
	p.Add(chunk("am_e", 1, 0, true, true)) // next turn waits for am_d to finish
	p.Add(chunk("am_d", 3, 0, true, true)) // sentence 2's audio never comes
	testkit.Eventually(t, 5*time.Second, func() bool {
		n := 0
		for _, e := range ev.get() {
			if e.Kind == SentenceDone {
				n++
			}
		}
		return n == 3
	}, "turns not played through")
	var order []string
	for _, e := range ev.get() {
		if e.Kind == SentenceDone {
			order = append(order, e.Sentence)
		}
	}
	if order[0] != "am_d_s1" || order[1] != "am_d_s3" || order[2] != "am_e_s1" {
		t.Fatalf("order %v", order)
	}
}

func BenchmarkPlayerAdd(b *testing.B) {
	p, err := NewPlayer(nil)
	if err != nil {
		b.Fatal(err)
	}
	sa := chunk("am_x", 1, 0, false, false)
	for i := 0; b.Loop(); i++ {
		sa.Chunk = int32(i)
		p.Add(sa)
		p.mu.Lock()
		p.queue = p.queue[:0]
		p.mu.Unlock()
	}
}

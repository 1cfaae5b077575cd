package reorder_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/room-agent/internal/reorder"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func chunk(turn string, seq, idx int32, last bool) *protocol.SpeechAudio {
	return &protocol.SpeechAudio{MessageID: turn, SentenceID: fmt.Sprintf("%s_s%d", turn, seq), Sequence: seq, Chunk: idx, Last: last}
}

// names prints chunks as turn:seq.chunk.
func names(chunks []*protocol.SpeechAudio) string {
	var out []string
	for _, c := range chunks {
		out = append(out, fmt.Sprintf("%s:%d.%d", c.MessageID, c.Sequence, c.Chunk))
	}
	return strings.Join(out, " ")
}

func want(t *testing.T, what string, got []*protocol.SpeechAudio, w string) {
	t.Helper()
	if g := names(got); g != w {
		t.Fatalf("%s: %q, want %q", what, g, w)
	}
}

// TestOrder: a turn's chunks come out by sentence and index whatever
// order they arrive in; repeated chunks are dropped.
func TestOrder(t *testing.T) {
	b := reorder.New()
	want(t, "2.0 first", b.Add(chunk("am_a", 2, 0, true), t0), "")
	want(t, "1.1 before 1.0", b.Add(chunk("am_a", 1, 1, true), t0), "")
	want(t, "1.0", b.Add(chunk("am_a", 1, 0, false), t0), "am_a:1.0 am_a:1.1 am_a:2.0")
	want(t, "1.0 again", b.Add(chunk("am_a", 1, 0, false), t0), "")
	want(t, "3.0", b.Add(chunk("am_a", 3, 0, true), t0), "am_a:3.0")
}

// TestTurnsInArrivalOrder: turns play one after the other in the order
// their audio first came, whatever their ids (message ids are random, and
// sorting them once played the turns out of order).
func TestTurnsInArrivalOrder(t *testing.T) {
	b := reorder.New()
	ids := []string{"am_zz", "am_mm", "am_aa"} // arrival order, reverse of the ids'
	want(t, "first turn", b.Add(chunk(ids[0], 1, 0, true), t0), "am_zz:1.0")
	for _, id := range ids[1:] {
		want(t, id+" waits", b.Add(chunk(id, 1, 0, true), t0), "")
	}
	want(t, "after the first", b.Finish("am_zz", t0), "am_mm:1.0")
	want(t, "after the second", b.Finish("am_mm", t0), "am_aa:1.0")
	want(t, "after the last", b.Finish("am_aa", t0), "")
	if b.Current() != "" || b.Waiting() != 0 {
		t.Fatalf("current %q, %d held after every turn finished", b.Current(), b.Waiting())
	}
}

// TestFullBufferKeepsTheNextTurn: beyond MaxTurns the newest turn's audio
// is dropped, never a turn that came before it: the next turn to play
// plays (the old eviction removed any turn but the current one, possibly
// the next).
func TestFullBufferKeepsTheNextTurn(t *testing.T) {
	b := reorder.New()
	b.MaxTurns = 3
	b.Add(chunk("am_1", 1, 0, false), t0)
	b.Add(chunk("am_2", 1, 0, true), t0) // the next turn
	b.Add(chunk("am_3", 1, 0, true), t0)
	for i := range 20 {
		b.Add(chunk(fmt.Sprintf("am_x%d", i), 1, 0, true), t0)
	}
	if b.Waiting() != 3 {
		t.Fatalf("%d turns held, want 3", b.Waiting())
	}
	want(t, "a dropped turn's later chunk", b.Add(chunk("am_x0", 2, 0, true), t0), "")
	want(t, "the next turn", b.Finish("am_1", t0), "am_2:1.0")
	want(t, "then", b.Finish("am_2", t0), "am_3:1.0")
}

// TestStop: a stopped turn's chunks are dropped for good; stopping the
// current turn starts the next; stopping a waiting one removes it.
func TestStop(t *testing.T) {
	b := reorder.New()
	b.Add(chunk("am_a", 1, 0, false), t0)
	b.Add(chunk("am_b", 1, 0, true), t0)
	b.Add(chunk("am_c", 1, 0, true), t0)
	want(t, "stop a waiting turn", b.Stop("am_c", t0), "")
	want(t, "stop the current turn", b.Stop("am_a", t0), "am_b:1.0")
	want(t, "a late chunk of a stopped turn", b.Add(chunk("am_a", 1, 1, true), t0), "")
	if !b.Stopped("am_a") || !b.Stopped("am_c") || b.Stopped("am_b") {
		t.Fatal("stopped turns not remembered")
	}
	want(t, "the next after b", b.Finish("am_b", t0), "")
	b.MaxStopped = 2
	b.Stop("am_d", t0) // am_c, the oldest stop, is forgotten
	if b.Stopped("am_c") || !b.Stopped("am_a") || !b.Stopped("am_d") {
		t.Fatal("the oldest stop was not the one forgotten")
	}
}

// TestSkipMissing: a sentence whose audio never comes is skipped after
// SkipMissing while later audio waits, not before; with nothing later
// waiting nothing is skipped.
func TestSkipMissing(t *testing.T) {
	b := reorder.New()
	want(t, "1", b.Add(chunk("am_a", 1, 0, true), t0), "am_a:1.0")
	if got, wait := b.Skip(t0.Add(time.Hour)); got != nil || wait != 0 {
		t.Fatalf("skipped %v (wait %s) with nothing waiting", names(got), wait)
	}
	at := t0.Add(time.Second)
	want(t, "3 while 2 is missing", b.Add(chunk("am_a", 3, 0, true), at), "")
	if got, wait := b.Skip(at.Add(time.Second)); got != nil || wait != 500*time.Millisecond {
		t.Fatalf("Skip after 1s = %v, %s; want nothing yet, 500ms to go", names(got), wait)
	}
	got, _ := b.Skip(at.Add(reorder.DefaultSkipMissing))
	want(t, "after SkipMissing", got, "am_a:3.0")
}

package speech

import (
	"context"
	"testing"
	"time"
)

func TestPacerWaitsForPlayout(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPacer(2)
	p.now = func() time.Time { return now }
	publish := func(d time.Duration) { p.sentenceStarts(); p.played(d) }

	publish(time.Second) // plays 0–1 s
	publish(time.Second) // waits, 1–2 s
	if len(p.starts) != 2 || !p.playEnd.Equal(now.Add(2*time.Second)) {
		t.Fatalf("starts %v, play end %v", p.starts, p.playEnd)
	}
	// One sentence waits for playout: a second one may be synthesised.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	publish(time.Second) // 2–3 s: now two wait
	blocked, cancelBlocked := context.WithCancel(context.Background())
	cancelBlocked()
	if err := p.wait(blocked); err == nil {
		t.Fatal("wait returned with two sentences waiting for playout")
	}
	now = now.Add(1500 * time.Millisecond) // sentence 2 is playing
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	// After a pause longer than what was queued, new audio starts now.
	now = now.Add(10 * time.Second)
	publish(500 * time.Millisecond)
	if !p.playEnd.Equal(now.Add(500 * time.Millisecond)) {
		t.Fatalf("play end %v, want now + 500 ms", p.playEnd.Sub(now))
	}
}

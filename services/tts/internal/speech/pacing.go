package speech

import (
	"context"
	"time"
)

// pacer keeps a turn's synthesis at most maxAhead sentences ahead of its
// playout. It does not hear from the room-agent: it assumes playout starts
// the moment a sentence's first chunk is published and runs in real time
// without gaps, so its estimate of what has been played is never behind the
// real one — synthesis may run a little further ahead than maxAhead, never
// late enough to leave a gap.
type pacer struct {
	maxAhead int
	now      func() time.Time
	playEnd  time.Time   // estimated end of playout of everything published
	starts   []time.Time // estimated playout starts of the sentences not yet playing
}

func newPacer(maxAhead int) *pacer { return &pacer{maxAhead: maxAhead, now: time.Now} }

// sentenceStarts is called when a sentence's first chunk is published: its
// playout begins after what is queued, or now if nothing is.
func (p *pacer) sentenceStarts() {
	now := p.now()
	start := p.playEnd
	if start.Before(now) {
		start = now
	}
	p.playEnd = start
	p.starts = append(p.starts, start)
}

// played adds d of published audio to the queue; audio published after
// the queue ran dry starts playing now.
func (p *pacer) played(d time.Duration) {
	if now := p.now(); p.playEnd.Before(now) {
		p.playEnd = now
	}
	p.playEnd = p.playEnd.Add(d)
}

// wait blocks until fewer than maxAhead synthesised sentences are waiting
// for playout.
func (p *pacer) wait(ctx context.Context) error {
	for {
		now := p.now()
		i := 0
		for i < len(p.starts) && !p.starts[i].After(now) {
			i++
		}
		p.starts = p.starts[i:]
		if len(p.starts) < p.maxAhead {
			return nil
		}
		t := time.NewTimer(p.starts[0].Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

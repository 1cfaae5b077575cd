package consume

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Progress is how far each partition of a stream is applied, whichever
// instance applies it: the loop of this instance advances the partitions it
// holds, the other instances' announcements (Advance too) and the offsets
// stored in the database (Refresh) the others. Readers that need their own
// write (history.get, persistence.applied) wait on it.
type Progress struct {
	names []string // the partitions, by index: ShardOf maps onto them
	parts map[string]*Watermark
	// Refresh, when set, reads every partition's stored offset; a wait that
	// lasts past RefreshAfter calls it (at most once per RefreshAfter), in
	// case an announcement was lost.
	Refresh      func(ctx context.Context) (map[string]uint64, error)
	RefreshAfter time.Duration

	mu        sync.Mutex
	refreshed time.Time
}

// NewProgress starts the partitions names (in order) at offsets.
func NewProgress(names []string, offsets map[string]uint64) *Progress {
	p := &Progress{names: names, parts: make(map[string]*Watermark, len(names)), RefreshAfter: 100 * time.Millisecond}
	for _, n := range names {
		p.parts[n] = NewWatermark(offsets[n])
	}
	return p
}

// Names are the partitions in order.
func (p *Progress) Names() []string { return p.names }

// Of is the partition conversation cid's envelopes belong to.
func (p *Progress) Of(cid string) string { return p.names[ShardOfConversation(cid, len(p.names))] }

// Advance raises the given partitions to their offsets (unknown names are
// ignored: an instance configured with other partitions).
func (p *Progress) Advance(offsets map[string]uint64) {
	for n, off := range offsets {
		if w, ok := p.parts[n]; ok {
			w.Advance(off)
		}
	}
}

// Applied is how far partition name is applied.
func (p *Progress) Applied(name string) uint64 {
	if w, ok := p.parts[name]; ok {
		return w.Applied()
	}
	return 0
}

// AppliedAll is how far every partition is applied: the lowest offset.
func (p *Progress) AppliedAll() uint64 {
	var low uint64
	for i, n := range p.names {
		if a := p.parts[n].Applied(); i == 0 || a < low {
			low = a
		}
	}
	return low
}

// Wait blocks until partition name is applied up to seq or ctx ends.
func (p *Progress) Wait(ctx context.Context, name string, seq uint64) error {
	w, ok := p.parts[name]
	if !ok {
		return fmt.Errorf("no partition %q", name)
	}
	if w.Applied() >= seq {
		return nil
	}
	if p.Refresh == nil {
		return w.Wait(ctx, seq)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, p.RefreshAfter)
		err := w.Wait(wctx, seq)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.refresh(ctx)
	}
}

// WaitAll blocks until every partition is applied up to seq or ctx ends.
func (p *Progress) WaitAll(ctx context.Context, seq uint64) error {
	for _, n := range p.names {
		if err := p.Wait(ctx, n, seq); err != nil {
			return err
		}
	}
	return nil
}

// refresh reads the stored offsets, unless another wait did within
// RefreshAfter.
func (p *Progress) refresh(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.refreshed) < p.RefreshAfter {
		return
	}
	offsets, err := p.Refresh(ctx)
	p.refreshed = time.Now()
	if err == nil {
		p.Advance(offsets)
	}
}

// Package consume turns a durable JetStream consumer into ordered batches
// that are applied in one transaction each and acknowledged after commit.
package consume

import (
	"context"
	"sync"
)

// Watermark is the highest stream sequence applied so far; readers that need
// their own write wait on it (read-your-writes).
type Watermark struct {
	mu      sync.Mutex
	applied uint64
	changed chan struct{}
}

// NewWatermark starts at seq.
func NewWatermark(seq uint64) *Watermark {
	return &Watermark{applied: seq, changed: make(chan struct{})}
}

// Applied returns the current watermark.
func (w *Watermark) Applied() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applied
}

// Advance raises the watermark to seq and wakes waiters.
func (w *Watermark) Advance(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq <= w.applied {
		return
	}
	w.applied = seq
	close(w.changed)
	w.changed = make(chan struct{})
}

// Wait blocks until the watermark reaches seq or ctx ends.
func (w *Watermark) Wait(ctx context.Context, seq uint64) error {
	for {
		w.mu.Lock()
		applied, ch := w.applied, w.changed
		w.mu.Unlock()
		if applied >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

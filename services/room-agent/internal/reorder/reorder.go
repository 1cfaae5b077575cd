// Package reorder puts the speech audio of the assistant's turns in play
// order: turns one after the other in the order their audio first came,
// a turn's sentences by sequence and each sentence's chunks by index. It
// holds no audio codec or resampler (the room-agent's player does that),
// so it is tested without cgo.
package reorder

import (
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Defaults of Buffer.
const (
	DefaultMaxTurns    = 64  // turns waiting at once
	DefaultMaxStopped  = 256 // stopped turns remembered
	DefaultSkipMissing = 1500 * time.Millisecond
)

// Buffer orders chunks. The zero value is not usable: use New. It is not
// safe for concurrent use (the player holds its own lock).
type Buffer struct {
	// MaxTurns bounds the turns held (the current one and those waiting).
	// Beyond, a new turn's audio is dropped, never a turn that came
	// before: the next turn to play is never the one lost.
	MaxTurns int
	// MaxStopped bounds the stopped turns remembered (their late chunks
	// ignored); the oldest stop is forgotten first.
	MaxStopped int
	// SkipMissing is how long the current turn waits for a missing
	// sentence while later audio waits, before skipping it (its synthesis
	// failed).
	SkipMissing time.Duration

	turns   map[string]*turn
	order   []string // turns held, by the arrival of their first chunk
	current string
	stopped map[string]bool
	stops   []string // stopped turns, oldest first
}

type turn struct {
	nextSeq, nextChunk int32
	pending            map[[2]int32]*protocol.SpeechAudio
	waitSince          time.Time // since when nextSeq/nextChunk is awaited while later audio is here
}

// New returns an empty buffer with the defaults.
func New() *Buffer {
	return &Buffer{MaxTurns: DefaultMaxTurns, MaxStopped: DefaultMaxStopped, SkipMissing: DefaultSkipMissing,
		turns: map[string]*turn{}, stopped: map[string]bool{}}
}

// Current is the turn playing ("" when none).
func (b *Buffer) Current() string { return b.current }

// Waiting is how many turns are held (the current one included).
func (b *Buffer) Waiting() int { return len(b.order) }

// Add takes a chunk of turn sa.MessageID and returns the chunks now ready
// to play, in order: the current turn's (the chunk's turn becomes current
// when none is). Chunks of a stopped turn, repeated chunks and chunks of a
// new turn beyond MaxTurns are dropped.
func (b *Buffer) Add(sa *protocol.SpeechAudio, now time.Time) []*protocol.SpeechAudio {
	id := sa.MessageID
	if b.stopped[id] {
		return nil
	}
	t := b.turns[id]
	if t == nil {
		if len(b.order) >= max(1, b.MaxTurns) {
			b.markStopped(id) // the newest turn gives way: every one before it still plays in order
			return nil
		}
		t = &turn{nextSeq: 1, pending: map[[2]int32]*protocol.SpeechAudio{}}
		b.turns[id] = t
		b.order = append(b.order, id)
	}
	key := [2]int32{sa.Sequence, sa.Chunk}
	if sa.Sequence < t.nextSeq || (sa.Sequence == t.nextSeq && sa.Chunk < t.nextChunk) {
		return nil // already played (a redelivery)
	}
	t.pending[key] = sa
	if b.current == "" {
		b.current = id
	}
	if b.current != id {
		return nil
	}
	return b.drain(t, now)
}

// drain returns the current turn's chunks that are next in order.
func (b *Buffer) drain(t *turn, now time.Time) []*protocol.SpeechAudio {
	var out []*protocol.SpeechAudio
	for {
		key := [2]int32{t.nextSeq, t.nextChunk}
		sa, ok := t.pending[key]
		if !ok {
			if len(t.pending) > 0 && t.waitSince.IsZero() {
				t.waitSince = now
			}
			if len(t.pending) == 0 {
				t.waitSince = time.Time{}
			}
			return out
		}
		t.waitSince = time.Time{}
		delete(t.pending, key)
		out = append(out, sa)
		if sa.Last {
			t.nextSeq, t.nextChunk = t.nextSeq+1, 0
		} else {
			t.nextChunk++
		}
	}
}

// Finish ends the current turn (its last sentence played) and starts the
// next one held, in arrival order; it returns that turn's chunks ready.
func (b *Buffer) Finish(id string, now time.Time) []*protocol.SpeechAudio {
	b.remove(id)
	if b.current != id {
		return nil
	}
	b.current = ""
	return b.next(now)
}

// Stop drops turn id for good (its later chunks are ignored); when it was
// the current one, the next turn held starts and its ready chunks are
// returned.
func (b *Buffer) Stop(id string, now time.Time) []*protocol.SpeechAudio {
	b.markStopped(id)
	b.remove(id)
	if b.current != id {
		return nil
	}
	b.current = ""
	return b.next(now)
}

// Stopped reports whether turn id was stopped (and is still remembered).
func (b *Buffer) Stopped(id string) bool { return b.stopped[id] }

// Skip gives up on the current turn's missing sentence once it has been
// awaited for SkipMissing while later audio waits, and returns what is then
// ready; otherwise it says how long until it would (0: nothing awaited).
func (b *Buffer) Skip(now time.Time) ([]*protocol.SpeechAudio, time.Duration) {
	t := b.turns[b.current]
	if t == nil || t.waitSince.IsZero() || len(t.pending) == 0 {
		return nil, 0
	}
	if wait := b.SkipMissing - now.Sub(t.waitSince); wait > 0 {
		return nil, wait
	}
	t.nextSeq, t.nextChunk, t.waitSince = t.nextSeq+1, 0, time.Time{}
	return b.drain(t, now), 0
}

// next makes the first turn held (in arrival order) current and returns
// its ready chunks.
func (b *Buffer) next(now time.Time) []*protocol.SpeechAudio {
	for _, id := range b.order {
		b.current = id
		return b.drain(b.turns[id], now)
	}
	return nil
}

func (b *Buffer) remove(id string) {
	if _, ok := b.turns[id]; !ok {
		return
	}
	delete(b.turns, id)
	for i, o := range b.order {
		if o == id {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
}

func (b *Buffer) markStopped(id string) {
	if b.stopped[id] {
		return
	}
	b.stopped[id] = true
	b.stops = append(b.stops, id)
	for len(b.stops) > max(1, b.MaxStopped) {
		delete(b.stopped, b.stops[0])
		b.stops = b.stops[1:]
	}
}

package speech

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Ahead synthesis hides the backend's time to first audio of a preemptive
// answer. During the end-of-turn silence the llm sends the answer's first
// sentence on alicia.spec.{cid}.speak to one replica (queue group); that
// replica synthesises it exactly as the turn would (synthesisFor) into an
// aheadEntry kept in memory, and publishes nothing. When a turn it speaks
// gets that sentence for real (sequence 1, same request), the turn plays the
// entry's audio, still filling if the synthesis is not over, instead of
// asking the backend again. A turn taken by another replica synthesises
// as usual: entries are not shared between replicas.
const (
	// AheadQueue is the queue group of the tts replicas on SpecSpeak.
	AheadQueue = "tts"
	// aheadPerConversation: a newer speculation replaces the oldest beyond it.
	aheadPerConversation = 2
	// aheadMaxEntries bounds the entries of a replica; more are refused.
	aheadMaxEntries = 128
	// aheadMaxBytes bounds an entry's audio (about 21 s) until a turn takes it.
	aheadMaxBytes = 1 << 20
)

var errAheadTooLong = errors.New("speech: sentence spoken ahead is too long to hold")

// aheadEntry is one sentence synthesised ahead: its audio so far and
// whether the synthesis is over.
type aheadEntry struct {
	key       synthesis
	requested time.Time
	cancel    context.CancelFunc
	timer     *time.Timer

	mu         sync.Mutex
	pcm        []byte
	changed    chan struct{} // closed and replaced when pcm grows or the synthesis ends
	firstAudio time.Time
	done       bool
	err        error
	taken      bool // a turn plays it: the size bound no longer applies
	tooLong    bool
}

// write takes the backend's PCM (a synth.Emit).
func (e *aheadEntry) write(p []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.taken && len(e.pcm)+len(p) > aheadMaxBytes {
		e.tooLong = true
		return errAheadTooLong
	}
	if e.firstAudio.IsZero() {
		e.firstAudio = time.Now()
	}
	e.pcm = append(e.pcm, p...)
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

func (e *aheadEntry) finish(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done, e.err = true, err
	close(e.changed)
	e.changed = make(chan struct{})
}

// replay emits the entry's audio as it is (or becomes) available and
// returns the synthesis's error; ending ctx cancels the synthesis.
func (e *aheadEntry) replay(ctx context.Context, emit func([]byte) error) error {
	defer e.cancel()
	off := 0
	for {
		e.mu.Lock()
		// pcm only grows: the bytes before len stay as they are even when
		// a later append moves the array.
		p, done, err, changed := e.pcm[off:], e.done, e.err, e.changed
		e.mu.Unlock()
		if len(p) > 0 {
			off += len(p)
			if err := emit(p); err != nil {
				return err
			}
			continue
		}
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// aheadStore holds one replica's entries, by conversation.
type aheadStore struct {
	ttl     time.Duration
	onDrop  func(e *aheadEntry, outcome string)
	base    context.Context
	stopAll context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	byConv map[string][]*aheadEntry
	n      int
	closed bool
}

func newAheadStore(ttl time.Duration, onDrop func(*aheadEntry, string)) *aheadStore {
	base, stop := context.WithCancel(context.Background())
	return &aheadStore{ttl: ttl, onDrop: onDrop, base: base, stopAll: stop, byConv: map[string][]*aheadEntry{}}
}

// begin adds an entry for key and returns it with the context its
// synthesis runs in, or nil when key is held already, the store is full
// or closed. The caller runs the synthesis and calls done when it ends.
func (st *aheadStore) begin(key synthesis) (*aheadEntry, context.Context) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, nil
	}
	list := st.byConv[key.cid]
	for _, e := range list {
		if e.key == key {
			return nil, nil
		}
	}
	if len(list) >= aheadPerConversation {
		st.removeLocked(list[0], "replaced")
		list = st.byConv[key.cid]
	}
	if st.n >= aheadMaxEntries {
		st.onDrop(nil, "refused")
		return nil, nil
	}
	ctx, cancel := context.WithCancel(st.base)
	e := &aheadEntry{key: key, requested: time.Now(), cancel: cancel, changed: make(chan struct{})}
	e.timer = time.AfterFunc(st.ttl, func() { st.remove(e, "expired") })
	st.byConv[key.cid] = append(list, e)
	st.n++
	st.wg.Add(1)
	return e, ctx
}

// done records the end of e's synthesis; an entry whose synthesis failed
// before a turn took it is dropped, so the turn asks the backend.
func (st *aheadStore) done(e *aheadEntry, err error) {
	defer st.wg.Done()
	e.finish(err)
	if err != nil {
		st.remove(e, "failed")
	}
}

// take removes and returns the entry of key for the turn about to speak
// it, or nil. Either way the conversation's other entries are dropped:
// the answer they guessed is not the one being spoken.
func (st *aheadStore) take(key synthesis) *aheadEntry {
	st.mu.Lock()
	defer st.mu.Unlock()
	var found *aheadEntry
	for _, e := range append([]*aheadEntry(nil), st.byConv[key.cid]...) {
		if e.key == key {
			found = e
			st.unlinkLocked(e)
			continue
		}
		st.removeLocked(e, "mismatch")
	}
	if found == nil {
		return nil
	}
	found.mu.Lock()
	usable := !found.tooLong && (!found.done || found.err == nil)
	found.taken = usable
	found.mu.Unlock()
	if !usable {
		found.cancel()
		st.onDrop(found, "failed")
		return nil
	}
	st.onDrop(found, "used")
	return found
}

// drop removes the conversation's entries (a cancelled preemptive answer).
func (st *aheadStore) drop(cid, outcome string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range append([]*aheadEntry(nil), st.byConv[cid]...) {
		st.removeLocked(e, outcome)
	}
}

func (st *aheadStore) remove(e *aheadEntry, outcome string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.removeLocked(e, outcome)
}

// removeLocked drops e if the store still holds it, cancelling its
// synthesis; st.mu is held.
func (st *aheadStore) removeLocked(e *aheadEntry, outcome string) {
	if st.unlinkLocked(e) {
		e.cancel()
		st.onDrop(e, outcome)
	}
}

// unlinkLocked takes e out of the store; st.mu is held.
func (st *aheadStore) unlinkLocked(e *aheadEntry) bool {
	list := st.byConv[e.key.cid]
	for i, x := range list {
		if x != e {
			continue
		}
		e.timer.Stop()
		list = append(list[:i:i], list[i+1:]...)
		if len(list) == 0 {
			delete(st.byConv, e.key.cid)
		} else {
			st.byConv[e.key.cid] = list
		}
		st.n--
		return true
	}
	return false
}

// close drops every entry, cancels every synthesis ahead (those a turn
// plays too) and waits for them.
func (st *aheadStore) close() {
	st.mu.Lock()
	st.closed = true
	for _, list := range st.byConv {
		for _, e := range list {
			e.timer.Stop()
			e.cancel()
		}
	}
	clear(st.byConv)
	st.n = 0
	st.mu.Unlock()
	st.stopAll()
	st.wg.Wait()
}

// onSpecSpeak takes the first sentence of a preemptive answer (one
// replica of the queue group gets it) and synthesises it ahead.
func (sp *Speaker) onSpecSpeak(_ context.Context, _ protocol.Envelope, b *protocol.AssistantSentence, in bus.Inbound) error {
	cid := in.Conversation
	switch {
	case b.ConversationID != cid:
		return fmt.Errorf("a sentence of conversation %q on the subject of %q", b.ConversationID, cid)
	case b.Sequence != 1:
		return fmt.Errorf("sentence %d sent ahead; only the first is", b.Sequence)
	case strings.TrimSpace(b.Text) == "":
		return nil
	}
	e, ctx := sp.ahead.begin(sp.synthesisFor(context.Background(), cid, b.Text))
	if e == nil {
		return nil
	}
	log := sp.d.Log.With().Str("conversation_id", cid).Logger()
	go sp.synthesizeAhead(ctx, e, log)
	return nil
}

// synthesizeAhead runs the backend request of an entry; the metrics are
// those of any backend request.
func (sp *Speaker) synthesizeAhead(ctx context.Context, e *aheadEntry, log zerolog.Logger) {
	m, engine := sp.d.Metrics, sp.d.Synth.Engine()
	ctx, cancel := context.WithTimeout(ctx, sp.s.Timeout)
	defer cancel()
	first := true
	err := sp.synthesize(ctx, e.key, func(p []byte) error {
		if first {
			first = false
			m.FirstByte.WithLabelValues(engine).Observe(time.Since(e.requested).Seconds())
		}
		return e.write(p)
	})
	switch {
	case err == nil:
		m.BackendRequests.WithLabelValues(engine, "ok").Inc()
		m.Synthesis.WithLabelValues(engine).Observe(time.Since(e.requested).Seconds())
	case ctx.Err() != nil:
		// Dropped, expired, or stopped with the turn playing it.
	default:
		m.BackendRequests.WithLabelValues(engine, "failed").Inc()
		log.Warn().Err(err).Msg("synthesis ahead failed; the sentence will be synthesised when it comes")
	}
	sp.ahead.done(e, err)
}

// onTurnEvent drops the entries of a conversation whose preemptive answer
// was cancelled: the user spoke again.
func (sp *Speaker) onTurnEvent(_ context.Context, _ protocol.Envelope, ev *protocol.TurnEvent, in bus.Inbound) error {
	if ev.Kind == protocol.TurnEventKindPreemptCancelled {
		sp.ahead.drop(in.Conversation, "cancelled")
	}
	return nil
}

// countAhead records an entry's end; for a used one, the backend time to
// first audio the turn did not wait for.
func (sp *Speaker) countAhead(e *aheadEntry, outcome string) {
	m := sp.d.Metrics
	m.Ahead.WithLabelValues(outcome).Inc()
	if outcome != "used" {
		return
	}
	now := time.Now()
	e.mu.Lock()
	first := e.firstAudio
	e.mu.Unlock()
	if first.IsZero() || first.After(now) {
		first = now
	}
	m.AheadSaved.Observe(first.Sub(e.requested).Seconds())
}

package agent

import (
	"context"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Hands-free mode: the conversation's effective Configuration.wakeWord
// (its own over its owner's UserSettings, Config.HandsFree) is on. Each
// utterance takes the mode it had when it began: its ASR jobs carry
// Config.WakeWords, so the asr answers it only if it begins with one, and
// publishes nothing of it on a stream until it knows (its partial
// transcripts and an unaddressed final one come on core NATS,
// alicia.spec.{cid}.transcript). The utterance's AudioChunk record is held
// until its final Transcription says addressed and dropped when it says
// not; an unaddressed utterance over an answer lets the answer go on, like
// a false interruption, and records nothing.

// handsFreeEvery is how often a listener reads the conversation's mode
// (from the prefs cache: memory, Postgres once a minute).
const handsFreeEvery = 250 * time.Millisecond

// heldTTL bounds how long an utterance's audio record waits for its final
// transcript (the asr gives up on a job well before).
const heldTTL = 2 * time.Minute

// readHandsFree reads the conversation's mode into l.handsFree (on a
// failed read it keeps the last known).
func (l *listener) readHandsFree(ctx context.Context) {
	f := l.r.cfg.HandsFree
	if f == nil {
		return
	}
	on, err := f(ctx, l.r.cid)
	if err != nil && ctx.Err() == nil {
		l.r.log.Warn().Err(err).Msg("hands-free mode: cannot read the conversation's preferences (keeping the last known)")
		return
	}
	l.handsFree.Store(on)
}

// followHandsFree keeps l.handsFree up to date until ctx ends.
func (l *listener) followHandsFree(ctx context.Context) {
	if l.r.cfg.HandsFree == nil {
		return
	}
	t := time.NewTicker(handsFreeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.readHandsFree(ctx)
		}
	}
}

// wakeWords are the words a job of an utterance in hands-free mode
// carries (nil: not in that mode).
func (l *listener) wakeWords() []string {
	if !l.uttHandsFree {
		return nil
	}
	return l.r.cfg.WakeWords
}

// heldRecords are the audio records of hands-free utterances waiting for
// their final transcript, by utterance id.
type heldRecords struct {
	mu sync.Mutex
	m  map[string]heldRecord
}

type heldRecord struct {
	publish func()
	at      time.Time
}

func (h *heldRecords) hold(utt string, publish func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]heldRecord{}
	}
	now := time.Now()
	for k, r := range h.m {
		if now.Sub(r.at) > heldTTL {
			delete(h.m, k) // its final transcript never came: never known addressed
		}
	}
	h.m[utt] = heldRecord{publish: publish, at: now}
}

// take removes utt's held record and returns its publish (nil: none).
func (h *heldRecords) take(utt string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.m[utt]
	if !ok {
		return nil
	}
	delete(h.m, utt)
	return r.publish
}

// addressed: a final Transcription on the stream; the utterance's held
// audio record, if any, is published now.
func (r *Room) addressed(tr *protocol.Transcription) {
	if publish := r.turns.held.take(tr.ID); publish != nil {
		publish()
	}
}

// notAddressed: the asr says a hands-free utterance's final transcript did
// not begin with a wake word. Its audio record is dropped; an answer it
// interrupted goes on (the barge-in's tracker hears the same transcript as
// no words: tracker.onSpecTranscript).
//
// The room's participants are told on the data channel (never stored): a
// Transcription{final, addressed: false} without its words, so the page can
// say the speech was heard but not taken.
func (r *Room) notAddressed(tr *protocol.Transcription) {
	r.turns.held.take(tr.ID)
	r.log.Debug().Str("utterance_id", tr.ID).Msg("hands-free: not addressed; nothing recorded")
	frame, err := protocol.Encode(protocol.New(r.cid, &protocol.Transcription{ID: tr.ID, ConversationID: r.cid, Final: true,
		Addressed: protocol.Ptr(false)}))
	if err != nil {
		return
	}
	select {
	case r.turns.marks <- frame:
	default:
	}
}

// isNotAddressed: a hands-free transcript that does not begin with a wake
// word (final or not: words not addressed to Alicia).
func isNotAddressed(tr *protocol.Transcription) bool {
	return tr.Addressed != nil && !*tr.Addressed
}

package turn

import (
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// branches remembers, per conversation, the branch as this replica left it
// after answering: the history the answer was built on, the user message and
// the answer. The next turn of the conversation uses it instead of reading
// history.get (which first waits until persistence has applied the previous
// answer) when no other answer was started since (the conversation's last
// StartAnswer is still the one this replica published), the new message came
// after the remembered answer was complete, and it continues the remembered
// head. Server envelopes that do not change the branch (transcriptions of
// the user's speech, Configuration answers) do not spoil it.
//
// A barge-in cuts a conversation (cut): the answer's contents in Postgres
// become what the user heard (persistence, from the room-agent's
// SentencePlayouts), which is not what this replica remembers, so the
// branch is forgotten. A turn running while that happens does not remember
// its branch either: it reads the conversation's cut generation when it
// starts, and remember stores nothing once it changed.
type branches struct {
	mu      sync.Mutex
	entries map[string]*branchEntry
	max     int
	ttl     time.Duration
	// cuts holds the generation of each conversation cut so far: the value
	// of cutSeq (the number of cuts) at its last cut. A conversation not in
	// it has generation cutFloor, cutSeq when cuts was last emptied (so a
	// turn that started before that remembers nothing).
	cuts             map[string]uint64
	cutSeq, cutFloor uint64
}

type branchEntry struct {
	lastSeq   uint64 // CONVERSATIONS sequence of the last server envelope the answer published
	answerSeq uint64 // ... and of its StartAnswer
	msgs      []rpc.HistoryMessage
	at        time.Time
}

func newBranches(max int, ttl time.Duration) *branches {
	return &branches{entries: map[string]*branchEntry{}, max: max, ttl: ttl, cuts: map[string]uint64{}}
}

// generation is cid's cut generation; a turn reads it before it reads the
// history and hands it to remember.
func (b *branches) generation(cid string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.generationLocked(cid)
}

func (b *branches) generationLocked(cid string) uint64 {
	if g, ok := b.cuts[cid]; ok {
		return g
	}
	return b.cutFloor
}

// cut forgets cid's branch after a barge-in and moves its generation on.
func (b *branches) cut(cid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, cid)
	b.cutSeq++
	if len(b.cuts) >= b.max {
		clear(b.cuts)
		b.cutFloor = b.cutSeq
	}
	b.cuts[cid] = b.cutSeq
}

// remember stores the branch of cid after a completed answer, unless cid
// was cut since the turn read generation gen.
func (b *branches) remember(cid string, gen, lastSeq, answerSeq uint64, msgs []rpc.HistoryMessage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.generationLocked(cid) != gen {
		delete(b.entries, cid)
		return
	}
	if len(b.entries) >= b.max {
		b.evictLocked()
	}
	b.entries[cid] = &branchEntry{lastSeq: lastSeq, answerSeq: answerSeq, msgs: msgs, at: time.Now()}
}

// forget drops what is remembered of cid (a stop, a failure, a variation).
func (b *branches) forget(cid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, cid)
}

// head is the remembered head of cid's branch, if any.
func (b *branches) head(cid string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[cid]
	if !ok || len(e.msgs) == 0 || time.Since(e.at) > b.ttl {
		return "", false
	}
	return e.msgs[len(e.msgs)-1].ID, true
}

// branch returns the remembered branch when lastAnswer is still the
// conversation's last StartAnswer, the conversation's last server envelope
// (lastServer) is the answer's own last one or neutral (cannot change the
// branch), and the message (at msgSeq) came after the remembered answer's
// last envelope: a message sent before the previous answer was out may have
// been chained elsewhere (to the previous question, say).
func (b *branches) branch(cid string, lastAnswer, lastServer uint64, neutral bool, msgSeq uint64) ([]rpc.HistoryMessage, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[cid]
	if !ok || e.answerSeq != lastAnswer || lastAnswer == 0 || msgSeq < e.lastSeq || time.Since(e.at) > b.ttl ||
		(lastServer != e.lastSeq && !neutral) {
		return nil, false
	}
	return e.msgs, true
}

// evictLocked drops expired entries, or the oldest half when none expired.
func (b *branches) evictLocked() {
	for cid, e := range b.entries {
		if time.Since(e.at) > b.ttl {
			delete(b.entries, cid)
		}
	}
	for cid := range b.entries {
		if len(b.entries) < b.max/2 {
			return
		}
		delete(b.entries, cid)
	}
}

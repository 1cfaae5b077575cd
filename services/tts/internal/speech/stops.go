package speech

import (
	"sync"
	"time"
)

// stops knows the turns this replica speaks, so a ControlStop received on
// core NATS cancels one at once, and remembers the turns a stop named, so a
// StartAnswer taken after its stop is not spoken.
type stops struct {
	mu      sync.Mutex
	byID    map[string]*turn
	current map[string]*turn // conversation → its latest turn here
	stopped map[string]time.Time
	orphans []orphan // sentences of turns not (yet) held here
}

// stoppedMemory bounds how long (and how many) stopped turn ids are kept.
const (
	stoppedMemory = 10 * time.Minute
	stoppedMax    = 50000
)

func newStops() *stops {
	return &stops{byID: map[string]*turn{}, current: map[string]*turn{}, stopped: map[string]time.Time{}}
}

// begin registers t, so core NATS routes its sentences to it, and hands it
// those that came first.
func (s *stops) begin(t *turn) {
	s.mu.Lock()
	s.byID[t.id] = t
	s.current[t.cid] = t
	s.claimOrphans(t)
	s.mu.Unlock()
}

func (s *stops) end(t *turn) {
	s.mu.Lock()
	if s.byID[t.id] == t {
		delete(s.byID, t.id)
	}
	if s.current[t.cid] == t {
		delete(s.current, t.cid)
	}
	s.mu.Unlock()
}

// stop halts the turn target names, or the conversation's current turn
// when target is empty; it reports whether a turn here was halted.
func (s *stops) stop(cid, target string) bool {
	s.mu.Lock()
	var t *turn
	if target == "" {
		t = s.current[cid]
	} else {
		t = s.byID[target]
		s.remember(target)
	}
	s.mu.Unlock()
	if t == nil {
		return false
	}
	t.halt(ErrStopped)
	return true
}

// remember records a stopped turn id; s.mu is held.
func (s *stops) remember(id string) {
	now := time.Now()
	if len(s.stopped) >= stoppedMax {
		for k, at := range s.stopped {
			if now.Sub(at) > stoppedMemory || len(s.stopped) >= stoppedMax {
				delete(s.stopped, k)
			}
		}
	}
	s.stopped[id] = now
}

// holds reports whether turn id is spoken here.
func (s *stops) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id] != nil
}

// wasStopped reports whether a stop named turn id.
func (s *stops) wasStopped(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.stopped[id]
	return ok && time.Since(at) < stoppedMemory
}

// all returns the running turns.
func (s *stops) all() []*turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*turn, 0, len(s.byID))
	for _, t := range s.byID {
		out = append(out, t)
	}
	return out
}

package turn

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// stops knows the turn running for each conversation on this replica, so a
// ControlStop received on core NATS cancels it at once.
type stops struct {
	mu      sync.Mutex
	running map[string]*running
	// untargeted ControlStops that found nothing running here: a turn that
	// starts right after may be the one the client meant.
	recent map[string]time.Time
}

type running struct {
	id       string // the assistant message id
	cancel   context.CancelCauseFunc
	stopped  atomic.Bool
	targeted atomic.Bool // the stop named this answer (persistence then completes it)
	speech   atomic.Bool // the stop was a barge-in (stopType speech)
}

func newStops() *stops {
	return &stops{running: map[string]*running{}, recent: map[string]time.Time{}}
}

func (s *stops) begin(cid, id string, cancel context.CancelCauseFunc) *running {
	r := &running{id: id, cancel: cancel}
	s.mu.Lock()
	s.running[cid] = r
	s.mu.Unlock()
	return r
}

func (s *stops) end(cid string, r *running) {
	s.mu.Lock()
	if s.running[cid] == r {
		delete(s.running, cid)
	}
	s.mu.Unlock()
}

// stop cancels the turn of cid when target is nil or names its answer;
// speech says the user cut in (a barge-in).
func (s *stops) stop(cid string, target *string, speech bool) bool {
	s.mu.Lock()
	r := s.running[cid]
	if r == nil && target == nil {
		now := time.Now()
		s.recent[cid] = now
		for k, at := range s.recent {
			if now.Sub(at) > time.Minute {
				delete(s.recent, k)
			}
		}
	}
	s.mu.Unlock()
	if r == nil || (target != nil && *target != r.id) {
		return false
	}
	if target != nil {
		r.targeted.Store(true)
	}
	r.speech.Store(speech)
	r.stopped.Store(true)
	r.cancel(ErrStopped)
	return true
}

// recentUntargeted reports (and forgets) an untargeted stop for cid that
// found no turn running.
func (s *stops) recentUntargeted(cid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.recent[cid]
	delete(s.recent, cid)
	return ok && time.Since(at) < time.Minute
}

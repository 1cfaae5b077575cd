package model

import (
	"sync"
	"time"
)

// BreakerState is where a Breaker stands.
type BreakerState int

// Breaker states.
const (
	Closed   BreakerState = iota // requests flow
	Open                         // requests fail fast until the cool-down ends
	HalfOpen                     // one probe request decides
)

func (s BreakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// Breaker is a circuit breaker over the model backend: it opens after
// Threshold consecutive failed requests, fails fast while open, and after
// Cooldown lets one probe through; the probe's success closes it, its
// failure opens it again.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration
	// OnChange, when set, is told every state change (metrics, logs).
	OnChange func(BreakerState)

	mu       sync.Mutex
	state    BreakerState
	failures int
	openedAt time.Time
	probing  bool
	now      func() time.Time
}

// Ticket is the permission for one request; report how it went exactly once.
type Ticket struct {
	b     *Breaker
	probe bool
}

// Allow returns a ticket, or ErrBreakerOpen while the breaker is open (or
// half-open with its probe in flight).
func (b *Breaker) Allow() (Ticket, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		if b.clock().Sub(b.openedAt) < b.Cooldown {
			return Ticket{}, ErrBreakerOpen
		}
		b.set(HalfOpen)
		fallthrough
	case HalfOpen:
		if b.probing {
			return Ticket{}, ErrBreakerOpen
		}
		b.probing = true
		return Ticket{b: b, probe: true}, nil
	}
	return Ticket{b: b}, nil
}

// State returns the current state.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Success: the backend answered.
func (t Ticket) Success() {
	if t.b == nil {
		return
	}
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.probe {
		b.probing = false
	}
	b.failures = 0
	if b.state != Closed {
		b.set(Closed)
	}
}

// Failure: the backend was down, failed or too slow.
func (t Ticket) Failure() {
	if t.b == nil {
		return
	}
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.probe {
		b.probing = false
	}
	b.failures++
	if b.state == HalfOpen || (b.state == Closed && b.failures >= b.Threshold) {
		b.openedAt = b.clock()
		b.set(Open)
	}
}

// Cancel: the request ended for the caller's reasons (stop, shutdown) and
// says nothing about the backend.
func (t Ticket) Cancel() {
	if t.b == nil || !t.probe {
		return
	}
	t.b.mu.Lock()
	t.b.probing = false
	t.b.mu.Unlock()
}

func (b *Breaker) set(s BreakerState) {
	b.state = s
	if b.OnChange != nil {
		b.OnChange(s)
	}
}

func (b *Breaker) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

package model

import (
	"errors"
	"testing"
	"time"
)

func TestBreakerStates(t *testing.T) {
	now := time.Unix(0, 0)
	var changes []BreakerState
	b := &Breaker{Threshold: 2, Cooldown: time.Second, now: func() time.Time { return now }, OnChange: func(s BreakerState) { changes = append(changes, s) }}
	mustAllow := func() Ticket {
		t.Helper()
		tk, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow in state %s: %v", b.State(), err)
		}
		return tk
	}
	mustAllow().Failure()
	mustAllow().Success() // resets the count
	mustAllow().Failure()
	if b.State() != Closed {
		t.Fatal("opened before Threshold consecutive failures")
	}
	mustAllow().Failure()
	if b.State() != Open {
		t.Fatal("not open after Threshold consecutive failures")
	}
	if _, err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("open breaker let a request through")
	}
	now = now.Add(time.Second)
	probe := mustAllow()
	if b.State() != HalfOpen {
		t.Fatalf("state after cool-down = %s", b.State())
	}
	if _, err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("second request while the probe runs")
	}
	probe.Cancel() // a stopped probe decides nothing
	probe = mustAllow()
	probe.Failure()
	if b.State() != Open {
		t.Fatal("failed probe did not reopen")
	}
	now = now.Add(time.Second)
	mustAllow().Success()
	if b.State() != Closed {
		t.Fatal("good probe did not close")
	}
	want := []BreakerState{Open, HalfOpen, Open, HalfOpen, Closed}
	if len(changes) != len(want) {
		t.Fatalf("changes = %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("changes = %v, want %v", changes, want)
		}
	}
}

package optimize

import (
	"context"
	"net/http"
	"sync"
)

// Gate gives the replica's turns priority over its optimisation runs: a
// run's model requests (replays, judging, reflection) start only while no
// turn runs in this replica, so a run never makes a conversation wait for
// the model. A request already sent when a turn begins goes on (a model
// server batches it beside the turn).
type Gate struct {
	mu     sync.Mutex
	active int
	idle   chan struct{} // closed while no turn runs
}

// NewGate returns a gate with no turn running.
func NewGate() *Gate {
	idle := make(chan struct{})
	close(idle)
	return &Gate{idle: idle}
}

// Enter marks a turn running until the returned leave is called.
func (g *Gate) Enter() (leave func()) {
	g.mu.Lock()
	if g.active == 0 {
		g.idle = make(chan struct{})
	}
	g.active++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			if g.active--; g.active == 0 {
				close(g.idle)
			}
			g.mu.Unlock()
		})
	}
}

// Wait returns once no turn runs (or with ctx's error).
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Transport is base (http.DefaultTransport when nil) whose requests wait
// for the gate first.
func (g *Gate) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return gated{g: g, base: base}
}

type gated struct {
	g    *Gate
	base http.RoundTripper
}

func (t gated) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.g.Wait(r.Context()); err != nil {
		return nil, err
	}
	return t.base.RoundTrip(r)
}

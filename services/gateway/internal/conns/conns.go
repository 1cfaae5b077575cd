// Package conns counts a gateway replica's long-lived connections of one
// kind (WebSockets, timeline streams) per user, against a quota
// (Quotas.ConnectionsPerUser), and ends them on shutdown: net/http's own
// Shutdown waits for them instead (a hijacked WebSocket it does not even
// see).
package conns

import (
	"context"
	"errors"
	"sync"
)

// Errors of Open.
var (
	// ErrTooMany: the user holds as many connections as allowed (429).
	ErrTooMany = errors.New("conns: too many connections for this user")
	// ErrStopping: Shutdown has begun (503).
	ErrStopping = errors.New("conns: the server is shutting down")
)

// Tracker counts open connections. The zero value is ready to use.
type Tracker struct {
	mu       sync.Mutex
	open     map[string]int // per user
	stopping chan struct{}  // closed by Shutdown
	active   sync.WaitGroup
}

// stop returns the channel Shutdown closes; under t.mu.
func (t *Tracker) stop() chan struct{} {
	if t.stopping == nil {
		t.stopping = make(chan struct{})
	}
	return t.stopping
}

// Open counts a connection of user, at most perUser of them (0: no limit),
// unless Shutdown has begun. release ends it; it must be called once.
func (t *Tracker) Open(user string, perUser int) (release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stop():
		return nil, ErrStopping
	default:
	}
	if t.open == nil {
		t.open = map[string]int{}
	}
	if perUser > 0 && t.open[user] >= perUser {
		return nil, ErrTooMany
	}
	t.open[user]++
	// Counted under mu, as Shutdown closes stopping: no connection starts
	// after its Wait.
	t.active.Add(1)
	return func() {
		t.mu.Lock()
		if t.open[user]--; t.open[user] <= 0 {
			delete(t.open, user) // memory is bounded by the users connected
		}
		t.mu.Unlock()
		t.active.Done()
	}, nil
}

// Stopping is closed when Shutdown begins: every connection ends then.
func (t *Tracker) Stopping() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stop()
}

// Shutdown refuses new connections (ErrStopping), tells the open ones to end
// (Stopping) and waits until they are released or ctx ends.
func (t *Tracker) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	select {
	case <-t.stop():
	default:
		close(t.stopping)
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.active.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

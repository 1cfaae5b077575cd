// Package conns counts a gateway replica's long-lived connections of one
// kind (WebSockets, timeline streams) per user, against a quota
// (Quotas.ConnectionsPerUser), ends them on shutdown (net/http's own
// Shutdown waits for them instead; a hijacked WebSocket it does not even
// see), and ends those of a revoked principal: a signed-out session, a
// removed API key, a deleted conversation (revocation.go).
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

// Principal is who a connection acts for.
type Principal struct {
	User string
	// Session is the bucket key of the web client session that opened it
	// (session.KeyOf); "" when an API key did.
	Session string
	// Key is the fingerprint of the API key behind it (auth.KeyOf): the
	// one it carried, or the one its session was opened with.
	Key string
}

// Reason says why a connection was ended.
type Reason int

// Reasons.
const (
	// SessionEnded: its session was signed out, ended by a newer sign-in
	// of its user or expired.
	SessionEnded Reason = iota + 1
	// ConversationDeleted: the conversation it is bound to was deleted.
	ConversationDeleted
	// KeyRemoved: the API key behind it was removed (or given to another
	// user).
	KeyRemoved
)

// String is the reason as the client is told it (a WebSocket close reason,
// a timeline stream's last event).
func (r Reason) String() string {
	switch r {
	case SessionEnded:
		return "signed out: the session ended; sign in again"
	case ConversationDeleted:
		return "conversation deleted"
	case KeyRemoved:
		return "the API key was removed"
	}
	return "ended"
}

// Conn is one open connection.
type Conn struct {
	t *Tracker
	p Principal

	mu           sync.Mutex
	conversation string
	reason       Reason
	ended        chan struct{}
	released     bool
}

// Bind records the conversation the connection is bound to: deleting it
// ends the connection.
func (c *Conn) Bind(cid string) {
	c.mu.Lock()
	c.conversation = cid
	c.mu.Unlock()
}

// Ended is closed when the connection's principal or conversation was
// revoked; Reason says which.
func (c *Conn) Ended() <-chan struct{} { return c.ended }

// Reason is why Ended is closed (0 while it is not).
func (c *Conn) Reason() Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// end closes Ended with r, once.
func (c *Conn) end(r Reason) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason != 0 {
		return false
	}
	c.reason = r
	close(c.ended)
	return true
}

// Release stops counting the connection; later calls do nothing.
func (c *Conn) Release() {
	t := c.t
	t.mu.Lock()
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		t.mu.Unlock()
		return
	}
	c.released = true
	c.mu.Unlock()
	user := c.p.User
	if t.open[user]--; t.open[user] <= 0 {
		delete(t.open, user) // memory is bounded by the users connected
	}
	delete(t.conns, c)
	t.mu.Unlock()
	t.active.Done()
}

// Tracker counts open connections. The zero value is ready to use.
type Tracker struct {
	mu       sync.Mutex
	open     map[string]int // per user
	conns    map[*Conn]struct{}
	stopping chan struct{} // closed by Shutdown
	active   sync.WaitGroup
}

// stop returns the channel Shutdown closes; under t.mu.
func (t *Tracker) stop() chan struct{} {
	if t.stopping == nil {
		t.stopping = make(chan struct{})
	}
	return t.stopping
}

// Open counts a connection of p, at most perUser of its user (0: no
// limit), unless Shutdown has begun. The connection's Release must be
// called once it is over.
func (t *Tracker) Open(p Principal, perUser int) (*Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stop():
		return nil, ErrStopping
	default:
	}
	if t.open == nil {
		t.open, t.conns = map[string]int{}, map[*Conn]struct{}{}
	}
	if perUser > 0 && t.open[p.User] >= perUser {
		return nil, ErrTooMany
	}
	t.open[p.User]++
	c := &Conn{t: t, p: p, ended: make(chan struct{})}
	t.conns[c] = struct{}{}
	// Counted under mu, as Shutdown closes stopping: no connection starts
	// after its Wait.
	t.active.Add(1)
	return c, nil
}

// EndSession ends the connections opened with the session of bucket key
// key and returns how many it ended.
func (t *Tracker) EndSession(key string) int {
	if key == "" {
		return 0
	}
	return t.end(SessionEnded, func(c *Conn) bool { return c.p.Session == key })
}

// EndKey ends the connections of user opened with the API key of
// fingerprint, directly or through a session, and returns how many it
// ended.
func (t *Tracker) EndKey(user, fingerprint string) int {
	if fingerprint == "" {
		return 0
	}
	return t.end(KeyRemoved, func(c *Conn) bool { return c.p.Key == fingerprint && c.p.User == user })
}

// EndConversation ends the connections bound to conversation cid and
// returns how many it ended.
func (t *Tracker) EndConversation(cid string) int {
	if cid == "" {
		return 0
	}
	return t.end(ConversationDeleted, func(c *Conn) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.conversation == cid
	})
}

func (t *Tracker) end(r Reason, match func(*Conn) bool) int {
	t.mu.Lock()
	var hit []*Conn
	for c := range t.conns {
		if match(c) {
			hit = append(hit, c)
		}
	}
	t.mu.Unlock()
	n := 0
	for _, c := range hit {
		if c.end(r) {
			n++
		}
	}
	return n
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

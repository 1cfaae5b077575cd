package conns_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
)

func TestPerUser(t *testing.T) {
	var tr conns.Tracker
	r1, err := tr.Open(conns.Principal{User: "alice"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Open(conns.Principal{User: "alice"}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Open(conns.Principal{User: "alice"}, 2); !errors.Is(err, conns.ErrTooMany) {
		t.Fatalf("third: %v, want ErrTooMany", err)
	}
	if _, err := tr.Open(conns.Principal{User: "bob"}, 2); err != nil {
		t.Fatalf("another user: %v", err)
	}
	r1.Release()
	if _, err := tr.Open(conns.Principal{User: "alice"}, 2); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	for range 5 {
		if _, err := tr.Open(conns.Principal{User: "carol"}, 0); err != nil {
			t.Fatalf("no limit: %v", err)
		}
	}
}

func TestShutdown(t *testing.T) {
	var tr conns.Tracker
	release, err := tr.Open(conns.Principal{User: "alice"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(context.Background()) }()
	select {
	case <-tr.Stopping():
	case <-time.After(5 * time.Second):
		t.Fatal("Stopping not closed")
	}
	if _, err := tr.Open(conns.Principal{User: "bob"}, 1); !errors.Is(err, conns.ErrStopping) {
		t.Fatalf("open during shutdown: %v, want ErrStopping", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a connection open", err)
	case <-time.After(50 * time.Millisecond):
	}
	release.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A deadline: Shutdown gives up waiting.
	var stuck conns.Tracker
	if _, err := stuck.Open(conns.Principal{User: "alice"}, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := stuck.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the deadline", err)
	}
}

// TestEnd: a revocation ends exactly the connections of the session or
// conversation it names, once, with its reason, and they still count
// until released.
func TestEnd(t *testing.T) {
	var tr conns.Tracker
	open := func(p conns.Principal) *conns.Conn {
		t.Helper()
		c, err := tr.Open(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s1 := open(conns.Principal{User: "alice", Session: "k1"})
	s1b := open(conns.Principal{User: "alice", Session: "k1"})
	s2 := open(conns.Principal{User: "alice", Session: "k2"})
	key := open(conns.Principal{User: "alice"})
	s2.Bind("c1")
	key.Bind("c1")
	other := open(conns.Principal{User: "bob"})
	other.Bind("c2")
	ended := func(c *conns.Conn) bool {
		select {
		case <-c.Ended():
			return true
		default:
			return false
		}
	}
	if n := tr.EndSession("k1"); n != 2 {
		t.Fatalf("EndSession ended %d, want 2", n)
	}
	if !ended(s1) || !ended(s1b) || ended(s2) || ended(key) || ended(other) {
		t.Fatal("EndSession ended the wrong connections")
	}
	if s1.Reason() != conns.SessionEnded || s1.Reason().String() == "" {
		t.Fatalf("reason %v", s1.Reason())
	}
	if n := tr.EndSession("k1"); n != 0 {
		t.Fatalf("a second EndSession ended %d, want 0 (already ended)", n)
	}
	if n := tr.EndSession(""); n != 0 {
		t.Fatalf("EndSession of no session ended %d (the key-authenticated ones)", n)
	}
	if n := tr.EndConversation("c1"); n != 2 {
		t.Fatalf("EndConversation ended %d, want 2", n)
	}
	if !ended(s2) || !ended(key) || ended(other) || key.Reason() != conns.ConversationDeleted {
		t.Fatal("EndConversation ended the wrong connections")
	}
	// Ended, not released: the user's connections still count.
	if _, err := tr.Open(conns.Principal{User: "alice"}, 4); !errors.Is(err, conns.ErrTooMany) {
		t.Fatalf("open beyond the quota with ended connections unreleased: %v", err)
	}
	for _, c := range []*conns.Conn{s1, s1b, s2, key} {
		c.Release()
		c.Release() // twice: nothing more
	}
	if _, err := tr.Open(conns.Principal{User: "alice"}, 1); err != nil {
		t.Fatalf("after the releases: %v", err)
	}
}

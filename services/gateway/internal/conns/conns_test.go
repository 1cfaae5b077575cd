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
	r1, err := tr.Open("alice", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Open("alice", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Open("alice", 2); !errors.Is(err, conns.ErrTooMany) {
		t.Fatalf("third: %v, want ErrTooMany", err)
	}
	if _, err := tr.Open("bob", 2); err != nil {
		t.Fatalf("another user: %v", err)
	}
	r1()
	if _, err := tr.Open("alice", 2); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	for range 5 {
		if _, err := tr.Open("carol", 0); err != nil {
			t.Fatalf("no limit: %v", err)
		}
	}
}

func TestShutdown(t *testing.T) {
	var tr conns.Tracker
	release, err := tr.Open("alice", 1)
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
	if _, err := tr.Open("bob", 1); !errors.Is(err, conns.ErrStopping) {
		t.Fatalf("open during shutdown: %v, want ErrStopping", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a connection open", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A deadline: Shutdown gives up waiting.
	var stuck conns.Tracker
	if _, err := stuck.Open("alice", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := stuck.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the deadline", err)
	}
}

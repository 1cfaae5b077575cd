package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// TestWatchEnded: a replica's watch hears every session that ends on any
// replica — signed out, evicted by a newer sign-in, expired — by its
// bucket key, and nothing for sessions that start or indexes that change.
func TestWatchEnded(t *testing.T) {
	ns := natstest.Run(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two replicas: one signs in and out, the other watches.
	a := openWith(t, natstest.JetStream(t, natstest.Connect(t, ns)), session.Config{TTL: time.Hour, PerUser: 1})
	b := openWith(t, natstest.JetStream(t, natstest.Connect(t, ns)), session.Config{TTL: time.Hour, PerUser: 1})
	heard := make(chan string, 8)
	done, err := b.WatchEnded(ctx, func(k string) { heard <- k })
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		select {
		case k := <-heard:
			return k
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the watch heard nothing", what)
			return ""
		}
	}
	first, _, err := a.Create(ctx, "alice", "fp")
	if err != nil {
		t.Fatal(err)
	}
	// PerUser 1: the second sign-in ends the first session.
	second, _, err := a.Create(ctx, "alice", "fp")
	if err != nil {
		t.Fatal(err)
	}
	if k := next("eviction"); k != session.KeyOf(first) {
		t.Fatalf("heard %s, want the evicted session's key %s", k, session.KeyOf(first))
	}
	if err := a.Revoke(ctx, second); err != nil {
		t.Fatal(err)
	}
	if k := next("sign-out"); k != session.KeyOf(second) {
		t.Fatalf("heard %s, want the signed-out session's key %s", k, session.KeyOf(second))
	}
	// Expiry: a store whose sessions last a second.
	short := openWith(t, natstest.JetStream(t, natstest.Connect(t, ns)), session.Config{TTL: time.Second, PerUser: 1})
	third, _, err := short.Create(ctx, "bob", "fp")
	if err != nil {
		t.Fatal(err)
	}
	if k := next("expiry"); k != session.KeyOf(third) {
		t.Fatalf("heard %s, want the expired session's key %s", k, session.KeyOf(third))
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
	select {
	case k := <-heard:
		t.Fatalf("heard %s besides the ended sessions", k)
	default:
	}
}

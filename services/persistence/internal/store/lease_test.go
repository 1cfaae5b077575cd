package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
	"github.com/alicia-voice/alicia/services/persistence/internal/store"
)

func userMessage(seq uint64, cid, id string) consume.Item {
	return consume.Item{
		Env: protocol.Envelope{StanzaID: int32(seq), ConversationID: cid, Type: protocol.TypeUserMessage,
			Body: &protocol.UserMessage{ID: id, ConversationID: cid, Content: "hi"}},
		Delivery: bus.Delivery{Stream: bus.StreamConversations, Sequence: seq, Subject: "alicia.conv." + cid + ".client.user_message"},
	}
}

// TestFencedApply: an instance whose lease was taken over (it stalled past
// the lease) can no longer commit anything of the partition, not even a
// batch that began before the take; the new owner applies from the offset
// stored with the rows; a release is fenced the same way.
func TestFencedApply(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	st := store.New(pool)
	const stream, part = bus.StreamConversations, "persistence/0"
	if _, err := st.ClaimOffsets(ctx, store.Stream{Name: stream, Created: "2026-11-27T00:00:00Z", LastSeq: 10}, "persistence"); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsurePartitions(ctx, stream, map[string]uint64{part: 0}); err != nil {
		t.Fatal(err)
	}
	unit := []store.Unit{{Stream: stream, Name: part}}
	ttl := time.Second
	a, err := st.Take(ctx, "a", unit, 1, ttl)
	if err != nil || len(a) != 1 {
		t.Fatalf("a takes: %v %v", a, err)
	}
	// b cannot take what a holds.
	if b, err := st.Take(ctx, "b", unit, 1, ttl); err != nil || len(b) != 0 {
		t.Fatalf("b took a held partition: %v %v", b, err)
	}
	asA := consume.Shard{Name: part, Held: true, Owner: "a", Fence: a[0].Fence}
	if err := st.Apply(ctx, stream, asA, []consume.Item{userMessage(1, "ac_fence", "am_fence1")}, 1); err != nil {
		t.Fatalf("a applies: %v", err)
	}

	// a stalls past its lease; b takes the partition over.
	if _, err := pool.Exec(ctx, `UPDATE alicia_stream_offsets SET lease_expires_at = now() - interval '1 second' WHERE consumer = $1`, part); err != nil {
		t.Fatal(err)
	}
	b, err := st.Take(ctx, "b", unit, 1, ttl)
	if err != nil || len(b) != 1 || b[0].Fence <= a[0].Fence || b[0].Offset != 1 {
		t.Fatalf("b takes over: %+v %v (a had fence %d)", b, err, a[0].Fence)
	}
	// a wakes up: its batch fails and writes nothing.
	err = st.Apply(ctx, stream, asA, []consume.Item{userMessage(2, "ac_fence", "am_fence2")}, 2)
	if !errors.Is(err, consume.ErrLeaseLost) {
		t.Fatalf("a applied after losing its lease: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM alicia_messages WHERE id = 'am_fence2'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a's late batch wrote %d messages (%v)", n, err)
	}
	// Renewing tells a it lost the partition; b keeps it.
	if kept, err := st.Renew(ctx, "a", a, ttl); err != nil || len(kept) != 0 {
		t.Fatalf("a renewed a lost lease: %v %v", kept, err)
	}
	if kept, err := st.Renew(ctx, "b", b, ttl); err != nil || len(kept) != 1 {
		t.Fatalf("b could not renew: %v %v", kept, err)
	}
	asB := consume.Shard{Name: part, Held: true, Owner: "b", Fence: b[0].Fence}
	if err := st.Apply(ctx, stream, asB, []consume.Item{userMessage(2, "ac_fence", "am_fence2")}, 2); err != nil {
		t.Fatalf("b applies: %v", err)
	}
	// a cannot release what b holds; b's release frees it for a.
	if err := st.Release(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	if kept, err := st.Renew(ctx, "b", b, ttl); err != nil || len(kept) != 1 {
		t.Fatalf("a's release took b's lease: %v %v", kept, err)
	}
	if err := st.Release(ctx, "b", b); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(ctx, stream, asB, nil, 3); !errors.Is(err, consume.ErrLeaseLost) {
		t.Fatalf("b applied after releasing: %v", err)
	}
	again, err := st.Take(ctx, "a", unit, 1, ttl)
	if err != nil || len(again) != 1 || again[0].Offset != 2 {
		t.Fatalf("a takes the released partition: %+v %v", again, err)
	}
}

// TestHeartbeatCountsTheLiving: instances are alive while seen within a
// lease; Leave gives everything back at once.
func TestHeartbeatCountsTheLiving(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	st := store.New(pool)
	ttl := time.Second
	for _, id := range []string{"a", "b"} {
		if _, _, err := st.Heartbeat(ctx, id, "persistence", 4, ttl); err != nil {
			t.Fatal(err)
		}
	}
	if live, blocked, err := st.Heartbeat(ctx, "c", "persistence", 4, ttl); err != nil || live != 3 || blocked {
		t.Fatalf("live = %d, blocked %v, %v; want 3, not blocked", live, blocked, err)
	}
	// d is configured with another partition count: it waits for the
	// others, who are not held up by it.
	if live, blocked, err := st.Heartbeat(ctx, "d", "persistence", 8, ttl); err != nil || live != 1 || !blocked {
		t.Fatalf("d: live = %d, blocked %v, %v; want 1, blocked", live, blocked, err)
	}
	if _, blocked, err := st.Heartbeat(ctx, "a", "persistence", 4, ttl); err != nil || blocked {
		t.Fatalf("a blocked by a later instance: %v %v", blocked, err)
	}
	if err := st.Leave(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE alicia_persistence_instances SET seen_at = now() - interval '5 seconds' WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	if live, _, err := st.Heartbeat(ctx, "c", "persistence", 4, ttl); err != nil || live != 2 {
		t.Fatalf("live = %d, %v; want 2 (a not seen for a lease)", live, err)
	}
	if err := st.Leave(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if live, _, err := st.Heartbeat(ctx, "c", "persistence", 4, ttl); err != nil || live != 1 {
		t.Fatalf("live = %d, %v; want 1 (b left)", live, err)
	}
}

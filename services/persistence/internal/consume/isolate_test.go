package consume

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// badApplier fails a transaction holding any bad item, like a constraint
// violation rolls back a whole batch, and records what it committed.
type badApplier struct {
	bad       map[uint64]bool
	txs       int
	committed []uint64 // sequences of the items applied, in order
	offsets   []uint64 // the offset of each committed transaction
}

func (a *badApplier) Apply(_ context.Context, _ string, _ Shard, items []Item, upTo uint64) error {
	a.txs++
	for _, it := range items {
		if a.bad[it.Delivery.Sequence] {
			return fmt.Errorf("%w: seq %d breaks a constraint", ErrData, it.Delivery.Sequence)
		}
	}
	for _, it := range items {
		a.committed = append(a.committed, it.Delivery.Sequence)
	}
	a.offsets = append(a.offsets, upTo)
	return nil
}

// TestBisectionIsolatesBadEnvelopes: a failing batch of 1000 with one or a
// few bad envelopes costs O(log n) transactions; every good envelope is
// applied once and in order, each bad one dead-lettered, offsets only grow
// and end at the batch's upTo (which may be beyond its last item).
func TestBisectionIsolatesBadEnvelopes(t *testing.T) {
	for _, c := range []struct {
		name   string
		bad    []uint64
		maxTxs int
	}{
		{"one bad first", []uint64{1}, 25},
		{"one bad in the middle", []uint64{500}, 25},
		{"one bad last", []uint64{1000}, 25},
		{"three bad", []uint64{7, 420, 999}, 70},
	} {
		t.Run(c.name, func(t *testing.T) {
			js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
			ctx := context.Background()
			if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
				t.Fatal(err)
			}
			a := &badApplier{bad: map[uint64]bool{}}
			for _, s := range c.bad {
				a.bad[s] = true
			}
			var items []Item
			for seq := uint64(1); seq <= 1000; seq++ {
				items = append(items, Item{Env: protocol.Envelope{Type: protocol.TypeUserMessage},
					Delivery: bus.Delivery{Stream: bus.StreamConversations, Sequence: seq, Subject: "alicia.conv.ac_x.client.user_message"}, Data: []byte{1}})
			}
			l := &Loop{Stream: bus.StreamConversations, Consumer: "persistence", Applier: a, DLQ: bus.NewDeadLetters(js), Log: zerolog.Nop()}
			const upTo = 1005 // envelopes of other shards follow
			if err := l.apply(ctx, Shard{Name: "shard0", Held: true}, items, upTo); err != nil {
				t.Fatal(err)
			}
			if a.txs > c.maxTxs {
				t.Errorf("%d transactions, want at most %d", a.txs, c.maxTxs)
			}
			want := 0
			for i, seq := range a.committed {
				for want++; a.bad[uint64(want)]; want++ {
				}
				if seq != uint64(want) {
					t.Fatalf("committed[%d] = %d, want %d", i, seq, want)
				}
			}
			if len(a.committed) != 1000-len(c.bad) {
				t.Fatalf("%d committed, want %d", len(a.committed), 1000-len(c.bad))
			}
			for i := 1; i < len(a.offsets); i++ {
				if a.offsets[i] < a.offsets[i-1] {
					t.Fatalf("offsets went back: %v", a.offsets)
				}
			}
			if last := a.offsets[len(a.offsets)-1]; last != upTo {
				t.Fatalf("last offset %d, want %d", last, upTo)
			}
			st, err := js.Stream(ctx, bus.StreamDeadLetter)
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != uint64(len(c.bad)) {
				t.Fatalf("%d dead letters, want %d", info.State.Msgs, len(c.bad))
			}
			t.Logf("%d transactions for %d bad among 1000", a.txs, len(c.bad))
		})
	}
}

package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// roundTrips counts the queries and batches sent to Postgres.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// conversationOf writes a conversation of n messages on one branch, each
// with a tool use, a reasoning step, a memory use, a vote on each and a
// note, and returns its id.
func conversationOf(t *testing.T, pool *pgxpool.Pool, n int) string {
	t.Helper()
	ctx := context.Background()
	cid := fmt.Sprintf("ac_n%d", n)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO alicia_conversations (id, user_id) VALUES ($1, 'alice')`, cid)
	exec(`INSERT INTO alicia_memory (id, user_id, content) VALUES ($1, 'alice', 'm') ON CONFLICT DO NOTHING`, "amem_1")
	prev := (*string)(nil)
	for i := range n {
		mid := fmt.Sprintf("%s_m%d", cid, i)
		exec(`INSERT INTO alicia_messages (id, conversation_id, sequence_number, previous_id, message_role, contents) VALUES ($1, $2, $3, $4, 'assistant', 'x')`,
			mid, cid, i, prev)
		exec(`INSERT INTO alicia_tool_uses (id, conversation_id, message_id, tool_name) VALUES ($1||'_t', $2, $1, 'calc')`, mid, cid)
		exec(`INSERT INTO alicia_reasoning_steps (id, message_id, content, sequence_number) VALUES ($1||'_r', $1, 'r', 1)`, mid)
		exec(`INSERT INTO alicia_memory_used (id, conversation_id, message_id, memory_id) VALUES ($1||'_u', $2, $1, 'amem_1')`, mid, cid)
		exec(`INSERT INTO alicia_notes (conversation_id, message_id, content, user_id) VALUES ($2, $1, 'n', 'alice')`, mid, cid)
		for _, v := range []struct{ typ, suffix string }{{"message", ""}, {"tool_use", "_t"}, {"reasoning", "_r"}, {"memory_usage", "_u"}} {
			exec(`INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote, user_id)
				VALUES ($2, $1, $3::feedback_target_type, $1||$4, 'up', 'alice')`, mid, cid, v.typ, v.suffix)
		}
		prev = &mid
	}
	exec(`UPDATE alicia_conversations SET tip_message_id = $2 WHERE id = $1`, cid, *prev)
	return cid
}

// TestFeedbackRoundTrips: reading a conversation's branch with its votes
// and notes takes the same number of round trips for 2 messages as for 40.
func TestFeedbackRoundTrips(t *testing.T) {
	url := pgtest.NewURL(t)
	seed, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(seed.Close)
	small, large := conversationOf(t, seed, 2), conversationOf(t, seed, 40)

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)
	read := func(cid string, want int) int64 {
		t.Helper()
		before := trips.n.Load()
		msgs, err := st.Branch(context.Background(), cid)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Feedback(context.Background(), "alice", msgs); err != nil {
			t.Fatal(err)
		}
		if len(msgs) != want {
			t.Fatalf("%d messages, want %d", len(msgs), want)
		}
		for _, m := range msgs {
			if m.Votes.Upvotes != 1 || m.Votes.UserVote == nil || m.NoteCount != 1 || len(m.ToolUses) != 1 || m.ToolUses[0].Votes.Upvotes != 1 ||
				len(m.Reasoning) != 1 || m.Reasoning[0].Votes.Upvotes != 1 || len(m.MemoriesUsed) != 1 || m.MemoriesUsed[0].Votes.Upvotes != 1 {
				t.Fatalf("message %s: %+v", m.ID, m)
			}
		}
		return trips.n.Load() - before
	}
	if s, l := read(small, 2), read(large, 40); s != l || s > 4 {
		t.Fatalf("round trips: %d for 2 messages, %d for 40", s, l)
	}
}

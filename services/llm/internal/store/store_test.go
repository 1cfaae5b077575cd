package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
)

// A conversation tree: u1 → a1 → u2 → {a2, a2b}, u2' (sibling of u2, deleted
// a3 under a2), and another conversation with a message of the same shape.
func TestReader(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO alicia_conversations (id) VALUES ('ac_1'), ('ac_2')`)
	msg := func(cid, id string, prev any, seq int, role, contents string) {
		exec(`INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))`, id, cid, prev, seq, role, contents, float64(seq))
	}
	msg("ac_1", "u1", nil, 1, "user", "hello")
	msg("ac_1", "a1", "u1", 2, "assistant", "hi")
	msg("ac_1", "u2", "a1", 3, "user", "question")
	msg("ac_1", "a2", "u2", 4, "assistant", "answer")
	msg("ac_1", "a2b", "u2", 5, "assistant", "other answer")
	msg("ac_1", "u2e", "a1", 6, "user", "edited question")
	msg("ac_1", "a3", "a2", 7, "assistant", "deleted")
	exec(`UPDATE alicia_messages SET deleted_at = now() WHERE id = 'a3'`)
	msg("ac_2", "x1", nil, 1, "user", "elsewhere")

	r := store.New(pool)
	m, err := r.Message(ctx, "ac_1", "u2")
	if err != nil || m.Role != "user" || m.PreviousID == nil || *m.PreviousID != "a1" || m.Contents != "question" || m.Status != "completed" {
		t.Fatalf("message %+v, %v", m, err)
	}
	for _, c := range []struct{ cid, id string }{{"ac_1", "nope"}, {"ac_1", "x1"}, {"ac_1", "a3"}} {
		if _, err := r.Message(ctx, c.cid, c.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Message(%s, %s) err = %v, want ErrNotFound", c.cid, c.id, err)
		}
	}

	ids := func(cid, id string, limit int) []string {
		t.Helper()
		chain, err := r.Chain(ctx, cid, id, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range chain {
			out = append(out, m.ID)
		}
		return out
	}
	for _, c := range []struct {
		name, id string
		limit    int
		want     []string
	}{
		{"branch to a2", "a2", 50, []string{"u1", "a1", "u2", "a2"}},
		{"branch to the edit", "u2e", 50, []string{"u1", "a1", "u2e"}},
		{"most recent only", "a2b", 2, []string{"u2", "a2b"}},
		{"deleted end", "a3", 50, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ids("ac_1", c.id, c.limit); !slices.Equal(got, c.want) {
				t.Fatalf("chain = %v, want %v", got, c.want)
			}
		})
	}
	if got := ids("ac_2", "a2", 50); got != nil {
		t.Fatalf("chain across conversations = %v", got)
	}

	sibs, err := r.Siblings(ctx, "ac_1", "u2")
	if err != nil || !slices.Equal(sibs, []string{"a2", "a2b"}) {
		t.Fatalf("siblings of u2 = %v, %v", sibs, err)
	}
	if sibs, _ := r.Siblings(ctx, "ac_1", "a1"); !slices.Equal(sibs, []string{"u2", "u2e"}) {
		t.Fatalf("siblings of a1 = %v", sibs)
	}
}

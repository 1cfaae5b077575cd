package demos_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/llm/internal/demos"
)

// store writes the rows a selector reads, as persistence would have.
type store struct {
	t    testing.TB
	pool *pgxpool.Pool
	seq  map[string]int
}

func newStore(t testing.TB) *store {
	return &store{t: t, pool: pgtest.New(t), seq: map[string]int{}}
}

func (s *store) exec(sql string, args ...any) {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), sql, args...); err != nil {
		s.t.Fatal(err)
	}
}

func (s *store) conversation(id, user string) {
	s.exec(`INSERT INTO alicia_conversations (id, user_id) VALUES ($1, $2)`, id, user)
}

// turn stores question q and answer a (id) in conversation cid after prev,
// and moves the conversation's tip to the answer.
func (s *store) turn(cid, id, prev, q, a string) {
	s.t.Helper()
	s.seq[cid] += 2
	n := s.seq[cid]
	var p any
	if prev != "" {
		p = prev
	}
	s.exec(`INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents, created_at)
		VALUES ($1, $2, $3, $4, 'user', $5, now() + make_interval(secs => $6))`, "q"+id, cid, p, n-1, q, float64(n-1))
	s.exec(`INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents, created_at)
		VALUES ($1, $2, $3, $4, 'assistant', $5, now() + make_interval(secs => $6))`, id, cid, "q"+id, n, a, float64(n))
	s.exec(`UPDATE alicia_conversations SET tip_message_id = $2 WHERE id = $1`, cid, id)
}

func (s *store) vote(cid, id, vote string) {
	s.exec(`INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote) VALUES ($1, $2, 'message', $2, $3)`, cid, id, vote)
}

func (s *store) judge(cid, id string, score float64) {
	s.exec(`INSERT INTO alicia_message_judgements (message_id, conversation_id, correctness, faithfulness, relevancy, judged_at)
		VALUES ($1, $2, $3, $3, $3, now())`, id, cid, score)
}

func ids(ds []demos.Demo) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.AnswerID)
	}
	return out
}

// The rules of choice, on one person's conversations next to another's.
func TestSelect(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	s.conversation("ac_old", "ann")
	s.conversation("ac_now", "ann")
	s.conversation("ac_bob", "bob")
	// ann's earlier conversation.
	s.turn("ac_old", "weather", "", "What is the weather in Paris tomorrow?", "Sunny, 21 degrees.")
	s.vote("ac_old", "weather", "up")
	s.turn("ac_old", "judged", "weather", "Will it rain in Paris on Sunday?", "No rain is expected.")
	s.judge("ac_old", "judged", 0.9)
	s.turn("ac_old", "lowjudged", "judged", "Is Paris weather good in May?", "Mostly.")
	s.judge("ac_old", "lowjudged", 0.5)
	s.turn("ac_old", "downvoted", "lowjudged", "Paris weather next week?", "Rainy.")
	s.judge("ac_old", "downvoted", 0.95)
	s.vote("ac_old", "downvoted", "down")
	s.turn("ac_old", "failed", "downvoted", "Paris weather tonight?", "Clear")
	s.vote("ac_old", "failed", "up")
	s.exec(`UPDATE alicia_messages SET completion_status = 'failed' WHERE id = 'failed'`)
	s.turn("ac_old", "stopped", "failed", "Paris weather at noon?", "It will")
	s.vote("ac_old", "stopped", "up")
	s.exec(`UPDATE alicia_messages SET interrupted_at = now() WHERE id = 'stopped'`)
	s.turn("ac_old", "deleted", "stopped", "Paris weather in the evening?", "Mild.")
	s.vote("ac_old", "deleted", "up")
	s.exec(`UPDATE alicia_messages SET deleted_at = now() WHERE id = 'deleted'`)
	s.turn("ac_old", "pasta", "stopped", "How long do I boil pasta?", strings.Repeat("Stir now and then. ", 100))
	s.vote("ac_old", "pasta", "up")
	// bob's, better matching and up-voted.
	s.turn("ac_bob", "bobs", "", "What is the weather in Paris tomorrow?", "Bob's answer.")
	s.vote("ac_bob", "bobs", "up")
	// ann's current conversation: its branch is in the history already.
	s.turn("ac_now", "inbranch", "", "Paris weather this weekend?", "Warm.")
	s.vote("ac_now", "inbranch", "up")

	sel := demos.New(s.pool, 10)
	q := demos.Query{UserID: "ann", ConversationID: "ac_now", Text: "What's the weather in Paris?", HistoryLimit: 50}
	got, err := sel.Select(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"weather", "judged", "pasta"}; !slices.Equal(ids(got), want) {
		t.Fatalf("chosen %v, want %v (similar first, then the unrelated one)", ids(got), want)
	}
	if got[0].Rank <= got[1].Rank || got[1].Rank <= 0 || got[2].Rank != 0 {
		t.Errorf("ranks %v, %v, %v: want decreasing, the unrelated one 0", got[0].Rank, got[1].Rank, got[2].Rank)
	}
	if got[0].Score != 1 || got[1].Score < 0.89 || got[1].Score > 0.91 {
		t.Errorf("scores %v, %v: want 1 for the up vote, 0.9 the judged mean", got[0].Score, got[1].Score)
	}
	if n := utf8.RuneCountInString(got[2].Answer); n > demos.DefaultMaxAnswer || !strings.HasSuffix(got[2].Answer, "…") {
		t.Errorf("long answer kept %d characters (%q…), want at most %d ending with an ellipsis", n, got[2].Answer[:20], demos.DefaultMaxAnswer)
	}

	t.Run("k bounds the count", func(t *testing.T) {
		got, err := demos.New(s.pool, 1).Select(ctx, q)
		if err != nil || !slices.Equal(ids(got), []string{"weather"}) {
			t.Fatalf("k=1: %v, %v", ids(got), err)
		}
	})
	t.Run("zero is off", func(t *testing.T) {
		got, err := demos.New(s.pool, 0).Select(ctx, q)
		if err != nil || len(got) != 0 {
			t.Fatalf("k=0: %v, %v", ids(got), err)
		}
	})
	t.Run("only the person's own", func(t *testing.T) {
		got, err := sel.Select(ctx, demos.Query{UserID: "bob", ConversationID: "ac_x", Text: q.Text, HistoryLimit: 50})
		if err != nil || !slices.Equal(ids(got), []string{"bobs"}) {
			t.Fatalf("bob: %v, %v", ids(got), err)
		}
		got, err = sel.Select(ctx, demos.Query{UserID: "carol", ConversationID: "ac_x", Text: q.Text, HistoryLimit: 50})
		if err != nil || len(got) != 0 {
			t.Fatalf("carol: %v, %v", ids(got), err)
		}
	})
	t.Run("outside the current branch", func(t *testing.T) {
		got, err := sel.Select(ctx, demos.Query{UserID: "ann", ConversationID: "ac_other", Text: "Paris weather this weekend?", HistoryLimit: 50})
		if err != nil || !slices.Contains(ids(got), "inbranch") {
			t.Fatalf("from another conversation the current one's turn serves: %v, %v", ids(got), err)
		}
	})
	t.Run("no word in common", func(t *testing.T) {
		got, err := sel.Select(ctx, demos.Query{UserID: "ann", ConversationID: "ac_now", Text: "?!", HistoryLimit: 50})
		if err != nil || len(got) != 3 {
			t.Fatalf("a message without words: %v, %v (want the best turns by score)", ids(got), err)
		}
	})
	t.Run("operators are words", func(t *testing.T) {
		got, err := sel.Select(ctx, demos.Query{UserID: "ann", ConversationID: "ac_now", Text: `-weather "Paris' OR ) & | !pasta`, HistoryLimit: 50})
		if err != nil || len(got) != 3 || got[len(got)-1].Rank == 0 {
			t.Fatalf("operators in the text: %v, %v (want every turn matched as words)", ids(got), err)
		}
	})
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"  padded  ", 6, "padded"},
		{"one two three four", 12, "one two…"},
		{"abcdefghij", 5, "abcd…"},
		{"héllo wörld çà", 10, "héllo…"},
		{"anything", 0, "anything"},
	} {
		if got := demos.Cut(c.in, c.n); got != c.want || utf8.RuneCountInString(got) > max(c.n, len(c.in)) {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

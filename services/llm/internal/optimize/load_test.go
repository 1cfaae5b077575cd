package optimize_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/llm/internal/optimize"
)

// Stored turns load with what replaying and judging them needs — the
// branch before the question, the memories and tool results the answer
// used, what the person said about it, whether it was spoken — those the
// person remarked on first; another person's conversations never enter a
// person's run.
func TestLoadStoredTurns(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Rows as persistence writes them (the test seeds the database directly).
	for _, q := range []string{
		`INSERT INTO alicia_conversations (id, user_id) VALUES ('ac_a1', 'us_alice'), ('ac_a2', 'us_alice'), ('ac_b1', 'us_bob')`,
		`INSERT INTO alicia_messages (id, conversation_id, sequence_number, previous_id, message_role, contents, created_at) VALUES
			('am_q0', 'ac_a1', 1, NULL, 'user', 'Hello', now() - interval '10 min'),
			('am_r0', 'ac_a1', 2, 'am_q0', 'assistant', 'Hi, how can I help?', now() - interval '9 min'),
			('am_q1', 'ac_a1', 3, 'am_r0', 'user', 'How warm will it be tomorrow?', now() - interval '8 min'),
			('am_r1', 'ac_a1', 4, 'am_q1', 'assistant', 'It will be 21.', now() - interval '7 min'),
			('am_q2', 'ac_a2', 1, NULL, 'user', 'Tell me a joke', now() - interval '2 min'),
			('am_r2', 'ac_a2', 2, 'am_q2', 'assistant', 'Why did the chicken...', now() - interval '1 min'),
			('am_qb', 'ac_b1', 1, NULL, 'user', 'Bob asks', now()),
			('am_rb', 'ac_b1', 2, 'am_qb', 'assistant', 'Bob is answered', now())`,
		`INSERT INTO alicia_memory (id, user_id, content) VALUES ('mem_1', 'us_alice', 'Alice lives in Paris')`,
		`INSERT INTO alicia_memory_used (conversation_id, message_id, memory_id, position_in_results) VALUES ('ac_a1', 'am_r1', 'mem_1', 0)`,
		`INSERT INTO alicia_tool_uses (conversation_id, message_id, tool_name, tool_arguments, tool_result, status) VALUES
			('ac_a1', 'am_r1', 'weather', '{"city":"Paris"}', '{"temp_c":21}', 'success'),
			('ac_a1', 'am_r1', 'web_search', '{"q":"x"}', NULL, 'error')`,
		`INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote, quick_feedback, user_id) VALUES
			('ac_a1', 'am_r1', 'message', 'am_r1', 'down', 'say the unit', 'us_alice')`,
		`INSERT INTO alicia_notes (conversation_id, message_id, content, user_id) VALUES ('ac_a1', 'am_r1', 'It should have said 21 degrees Celsius.', 'us_alice')`,
		`INSERT INTO alicia_sentences (message_id, sentence_sequence_number, text, playout_status) VALUES ('am_r1', 1, 'It will be 21.', 'played')`,
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	turns, err := optimize.Load(context.Background(), pool, optimize.Scope{UserIDs: []string{"us_alice"}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tu := range turns {
		ids = append(ids, tu.MessageID)
	}
	// am_r1 was remarked on: first; am_r2 is newer; am_r0 answers a question too.
	if !slices.Equal(ids, []string{"am_r1", "am_r2", "am_r0"}) {
		t.Fatalf("turns %v, want alice's, the remarked one first", ids)
	}
	r1 := turns[0]
	if r1.Question != "How warm will it be tomorrow?" || r1.Answer != "It will be 21." || !r1.Spoken || r1.Vote != -1 {
		t.Fatalf("turn %+v", r1)
	}
	if len(r1.History) != 2 || r1.History[0] != (optimize.Message{Role: "user", Content: "Hello"}) || r1.History[1].Role != "assistant" {
		t.Fatalf("history %+v", r1.History)
	}
	if !slices.Equal(r1.Memories, []string{"Alice lives in Paris"}) {
		t.Fatalf("memories %v", r1.Memories)
	}
	if len(r1.Tools) != 1 || r1.Tools[0].Name != "weather" || r1.Tools[0].Result != `{"temp_c": 21}` {
		t.Fatalf("tool calls %+v (only the successful one, with its result)", r1.Tools)
	}
	if !slices.Equal(r1.Feedback, []string{"say the unit", "It should have said 21 degrees Celsius."}) {
		t.Fatalf("feedback %v", r1.Feedback)
	}
	if turns[1].Spoken || len(turns[1].History) != 0 {
		t.Fatalf("turn %+v", turns[1])
	}
	bob, err := optimize.Load(context.Background(), pool, optimize.Scope{UserIDs: []string{"us_bob"}}, 10)
	if err != nil || len(bob) != 1 || bob[0].MessageID != "am_rb" {
		t.Fatalf("bob's turns %+v (%v)", bob, err)
	}
	if _, err := optimize.Load(context.Background(), pool, optimize.Scope{}, 10); err == nil {
		t.Fatal("a scope naming nobody loaded turns")
	}
}

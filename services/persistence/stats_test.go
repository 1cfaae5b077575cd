package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestSessionStats: a voice session's SessionStats is the conversation's
// latest session: its counts, its duration, when it began and ended; the
// next session's replaces it.
func TestSessionStats(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := "ac_stats"
	s.client(cid, 1, &protocol.UserMessage{ID: "am_st1", ConversationID: cid, Content: "hi"}, map[string]any{"alicia.user_id": "u1"})
	first := s.server(cid, &protocol.SessionStats{MessageCount: 4, ToolCallCount: 1, MemoriesUsed: 2, SessionDurationMs: 90_000}, nil)
	s.applied("CONVERSATIONS", first)
	var msgs, tools, mems int
	var dur int64
	var began, ended time.Time
	read := func() {
		t.Helper()
		if err := s.pool.QueryRow(context.Background(), `SELECT message_count, tool_call_count, memories_used, session_duration_ms,
				session_started_at, last_activity_at FROM alicia_session_stats WHERE conversation_id = $1`, cid).
			Scan(&msgs, &tools, &mems, &dur, &began, &ended); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if msgs != 4 || tools != 1 || mems != 2 || dur != 90_000 || ended.Sub(began) != 90*time.Second || time.Since(ended) > time.Minute {
		t.Fatalf("stats %d %d %d %d, %v..%v", msgs, tools, mems, dur, began, ended)
	}
	second := s.server(cid, &protocol.SessionStats{MessageCount: 2, SessionDurationMs: 5_000}, nil)
	s.applied("CONVERSATIONS", second)
	read()
	if msgs != 2 || tools != 0 || dur != 5_000 {
		t.Fatalf("the latest session's stats: %d messages, %d tools, %d ms", msgs, tools, dur)
	}
}

// TestAnswerDurations: an answer records how long it took from its start
// to its last sentence (or to the AssistantMessage completing it), and the
// conversation the sum over its answers; a redelivered end counts nothing
// twice.
func TestAnswerDurations(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := "ac_durations"
	s.client(cid, 1, &protocol.UserMessage{ID: "am_du1", ConversationID: cid, Content: "one"}, map[string]any{"alicia.user_id": "u1"})
	s.server(cid, &protocol.StartAnswer{ID: "am_da1", PreviousID: "am_du1", ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantSentence{PreviousID: "am_da1", ConversationID: cid, Sequence: 1, Text: "First."}, nil)
	final := &protocol.AssistantSentence{ID: ptr("ams_da1_2"), PreviousID: "am_da1", ConversationID: cid, Sequence: 2, Text: "Done.", IsFinal: ptr(true)}
	s.server(cid, final, nil)
	s.server(cid, final, nil) // redelivered
	s.client(cid, 2, &protocol.UserMessage{ID: "am_du2", PreviousID: ptr("am_da1"), ConversationID: cid, Content: "two"}, map[string]any{"alicia.user_id": "u1"})
	s.server(cid, &protocol.StartAnswer{ID: "am_da2", PreviousID: "am_du2", ConversationID: cid}, nil)
	seq := s.server(cid, &protocol.AssistantMessage{ID: "am_da2", PreviousID: ptr("am_du2"), ConversationID: cid, Content: "Whole."}, nil)
	s.applied("CONVERSATIONS", seq)
	var d1, d2 *int
	var total int64
	if err := s.pool.QueryRow(context.Background(), `SELECT (SELECT processing_duration_ms FROM alicia_messages WHERE id = 'am_da1'),
			(SELECT processing_duration_ms FROM alicia_messages WHERE id = 'am_da2'), total_duration_ms
		FROM alicia_conversations WHERE id = $1`, cid).Scan(&d1, &d2, &total); err != nil {
		t.Fatal(err)
	}
	if d1 == nil || d2 == nil || *d1 < 0 || *d2 < 0 || total != int64(*d1+*d2) {
		t.Fatalf("durations %v, %v; conversation %d ms", d1, d2, total)
	}
	var first time.Time
	var last time.Time
	if err := s.pool.QueryRow(context.Background(), `SELECT m.created_at, max(s.created_at) FROM alicia_messages m JOIN alicia_sentences s ON s.message_id = m.id
		WHERE m.id = 'am_da1' GROUP BY m.created_at`).Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	if want := int(last.Sub(first).Milliseconds()); *d1 < want-1 || *d1 > want+1 {
		t.Fatalf("the first answer took %d ms, its sentences say %d", *d1, want)
	}
}

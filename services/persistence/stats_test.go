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

package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/persistence"
)

// TestSweepClosesCrashedAnswers: an answer a crash left streaming (a
// sentence written, a tool call never answered) is closed by the sweep
// once it is older than the cut-off: an ErrorMessage on the
// conversation's server subject (the client is told, and a replay of the
// stream does the same), which persistence applies: the answer failed,
// its tool use cancelled, no sentence left pending or streaming. A
// finished answer and a recent open one are left alone; sweeping again
// (or from a second instance at once) publishes nothing more.
func TestSweepClosesCrashedAnswers(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := "ac_sweep"
	s.client(cid, 1, &protocol.UserMessage{ID: "am_su1", ConversationID: cid, Content: "What is 2+2?"}, map[string]any{"alicia.user_id": "u1"})
	s.server(cid, &protocol.StartAnswer{ID: "am_crashed", PreviousID: "am_su1", ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantSentence{PreviousID: "am_crashed", ConversationID: cid, Sequence: 1, Text: "Let me work that out."}, nil)
	s.server(cid, &protocol.ToolUseRequest{ID: "atu_crashed", MessageID: "am_crashed", ConversationID: cid, ToolName: "calculator",
		Parameters: map[string]any{"expression": "2+2"}, Execution: "server"}, nil)
	other := "ac_fine"
	s.client(other, 1, &protocol.UserMessage{ID: "am_fu1", ConversationID: other, Content: "hi"}, map[string]any{"alicia.user_id": "u1"})
	s.server(other, &protocol.StartAnswer{ID: "am_fine", PreviousID: "am_fu1", ConversationID: other}, nil)
	seq := s.server(other, &protocol.AssistantSentence{PreviousID: "am_fine", ConversationID: other, Sequence: 1, Text: "Hello.", IsFinal: ptr(true)}, nil)
	s.applied("CONVERSATIONS", seq)
	status := func(id string) string {
		var st string
		if err := s.pool.QueryRow(context.Background(), `SELECT completion_status::text FROM alicia_messages WHERE id = $1`, id).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status("am_crashed"); st != "streaming" && st != "pending" {
		t.Fatalf("the crashed answer is %s before the sweep", st)
	}

	// Not yet stale: nothing.
	if n, err := persistence.SweepOnce(t.Context(), s.pool, s.js, 15*time.Minute, time.Now()); err != nil || n != 0 {
		t.Fatalf("sweep of a recent answer: %d, %v", n, err)
	}
	// An hour later: closed, once, whoever sweeps.
	later := time.Now().Add(time.Hour)
	for range 2 {
		if n, err := persistence.SweepOnce(t.Context(), s.pool, s.js, 15*time.Minute, later); err != nil || n != 1 {
			t.Fatalf("sweep an hour later: %d, %v", n, err)
		}
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return status("am_crashed") == "failed" }, "the crashed answer failed")
	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences WHERE message_id = 'am_crashed' AND completion_status IN ('pending', 'streaming')`); n != 0 {
		t.Fatalf("%d sentences of the crashed answer still open", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_tool_uses WHERE id = 'atu_crashed' AND status = 'cancelled'`); n != 1 {
		t.Fatal("the crashed answer's tool use is not cancelled")
	}
	if st := status("am_fine"); st != "completed" {
		t.Fatalf("the finished answer became %s", st)
	}
	if n, err := persistence.SweepOnce(t.Context(), s.pool, s.js, 15*time.Minute, later); err != nil || n != 0 {
		t.Fatalf("sweep after: %d, %v", n, err)
	}
	// One ErrorMessage on the stream, for the client and any replay.
	st, err := s.js.Stream(t.Context(), "CONVERSATIONS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subjects.Server(cid, protocol.TypeErrorMessage)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subjects.Server(cid, protocol.TypeErrorMessage)]; n != 1 {
		t.Fatalf("%d ErrorMessages on the stream, want 1", n)
	}
}

// TestStopCancelsToolUses: a stopped turn's tool use not yet answered is
// cancelled.
func TestStopCancelsToolUses(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := "ac_stopped"
	s.client(cid, 1, &protocol.UserMessage{ID: "am_tu1", ConversationID: cid, Content: "search the web"}, map[string]any{"alicia.user_id": "u1"})
	s.server(cid, &protocol.StartAnswer{ID: "am_stopped", PreviousID: "am_tu1", ConversationID: cid}, nil)
	s.server(cid, &protocol.ToolUseRequest{ID: "atu_stopped", MessageID: "am_stopped", ConversationID: cid, ToolName: "web_search",
		Parameters: map[string]any{"query": "x"}, Execution: "server"}, nil)
	seq := s.client(cid, 2, &protocol.ControlStop{ConversationID: cid, TargetID: ptr("am_stopped")}, map[string]any{"alicia.user_id": "u1"})
	s.applied("CONVERSATIONS", seq)
	if n := s.queryInt(`SELECT count(*) FROM alicia_tool_uses WHERE id = 'atu_stopped' AND status = 'cancelled'`); n != 1 {
		t.Fatal("the stopped turn's tool use is not cancelled")
	}
}

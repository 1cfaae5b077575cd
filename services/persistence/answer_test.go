package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// messageRow is what the answer tests read back of a message.
type messageRow struct {
	role, contents, status, prev string
	seq                          int
	interrupted                  bool
}

func readMessage(t *testing.T, s *stack, id string) messageRow {
	t.Helper()
	var m messageRow
	err := s.pool.QueryRow(context.Background(), `SELECT message_role::text, contents, completion_status::text, COALESCE(previous_id, ''),
		sequence_number, interrupted_at IS NOT NULL FROM alicia_messages WHERE id = $1`, id).
		Scan(&m.role, &m.contents, &m.status, &m.prev, &m.seq, &m.interrupted)
	if err != nil {
		t.Fatalf("message %s: %v", id, err)
	}
	return m
}

// TestAnswerEndings: how an answer that started streaming ends — the whole
// content in one AssistantMessage, a stop, an error — and a fresh
// AssistantMessage, each published after a user message of its own conversation.
func TestAnswerEndings(t *testing.T) {
	s := newStack(t)
	s.start()
	user := map[string]any{"alicia.user_id": "user-1"}
	start := func(cid string) (userID, answerID string) {
		userID, answerID = "am_u_"+cid, "am_a_"+cid
		s.client(cid, 1, &protocol.UserMessage{ID: userID, ConversationID: cid, Content: "Tell me a story."}, user)
		s.server(cid, &protocol.StartAnswer{ID: answerID, PreviousID: userID, ConversationID: cid}, nil)
		return userID, answerID
	}
	sentence := func(cid, answer string, seq int32, text string) uint64 {
		return s.server(cid, &protocol.AssistantSentence{PreviousID: answer, ConversationID: cid, Sequence: seq, Text: text}, nil)
	}

	cases := []struct {
		name string
		// publish writes the ending and returns the last sequence.
		publish func(cid, userID, answerID string) uint64
		want    messageRow
	}{
		{"whole content after StartAnswer", func(cid, u, a string) uint64 {
			return s.server(cid, &protocol.AssistantMessage{ID: a, PreviousID: &u, ConversationID: cid, Content: "Once upon a time. The end."}, nil)
		}, messageRow{role: "assistant", contents: "Once upon a time. The end.", status: "completed", seq: 2}},
		{"whole content without previousId", func(cid, u, a string) uint64 {
			return s.server(cid, &protocol.AssistantMessage{ID: a, ConversationID: cid, Content: "Once upon a time."}, nil)
		}, messageRow{role: "assistant", contents: "Once upon a time.", status: "completed", seq: 2}},
		{"whole content redelivered under a new sequence", func(cid, u, a string) uint64 {
			s.server(cid, &protocol.AssistantMessage{ID: a, PreviousID: &u, ConversationID: cid, Content: "Once upon a time."}, nil)
			return s.server(cid, &protocol.AssistantMessage{ID: a, PreviousID: &u, ConversationID: cid, Content: "Something else."}, nil)
		}, messageRow{role: "assistant", contents: "Once upon a time.", status: "completed", seq: 2}},
		{"stop keeps the partial answer", func(cid, u, a string) uint64 {
			sentence(cid, a, 1, "Once upon a time.")
			sentence(cid, a, 2, "There was a fox.")
			s.client(cid, 2, &protocol.ControlStop{ConversationID: cid, TargetID: &a}, user)
			// A sentence already on its way when the stop landed is kept:
			// the client received it too.
			return sentence(cid, a, 3, "Too late.")
		}, messageRow{role: "assistant", contents: "Once upon a time. There was a fox. Too late.", status: "completed", seq: 2, interrupted: true}},
		{"error fails the answer", func(cid, u, a string) uint64 {
			sentence(cid, a, 1, "Once upon")
			return s.server(cid, &protocol.ErrorMessage{ID: "ae_" + cid, ConversationID: cid, Code: protocol.CodeBackendUnavailable,
				Message: "llm backend unavailable", OriginatingID: &a, Recoverable: true, Severity: 2}, nil)
		}, messageRow{role: "assistant", contents: "Once upon", status: "failed", seq: 2}},
		{"error after completion changes nothing", func(cid, u, a string) uint64 {
			s.server(cid, &protocol.AssistantMessage{ID: a, PreviousID: &u, ConversationID: cid, Content: "Done."}, nil)
			return s.server(cid, &protocol.ErrorMessage{ID: "ae_" + cid, ConversationID: cid, Code: protocol.CodeBackendUnavailable,
				Message: "late", OriginatingID: &a, Severity: 1}, nil)
		}, messageRow{role: "assistant", contents: "Done.", status: "completed", seq: 2}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cid := "ac_end" + string(rune('a'+i))
			u, a := start(cid)
			last := c.publish(cid, u, a)
			h := s.history(cid, last)
			c.want.prev = u
			if got := readMessage(t, s, a); got != c.want {
				t.Fatalf("answer = %+v, want %+v", got, c.want)
			}
			if len(h.Messages) != 2 || h.Messages[1].ID != a || h.Messages[1].Contents != c.want.contents {
				t.Fatalf("history = %+v", h.Messages)
			}
		})
	}

	t.Run("fresh AssistantMessage inserts", func(t *testing.T) {
		const cid = "ac_endfresh"
		u := "am_u_" + cid
		s.client(cid, 1, &protocol.UserMessage{ID: u, ConversationID: cid, Content: "Hi"}, user)
		seq := s.server(cid, &protocol.AssistantMessage{ID: "am_a_" + cid, ConversationID: cid, Content: "Hello!"}, nil)
		h := s.history(cid, seq)
		if len(h.Messages) != 2 {
			t.Fatalf("history = %+v", h.Messages)
		}
		want := messageRow{role: "assistant", contents: "Hello!", status: "completed", prev: u, seq: 2}
		if got := readMessage(t, s, "am_a_"+cid); got != want {
			t.Fatalf("answer = %+v, want %+v", got, want)
		}
	})
}

// TestConversationStatus: deleted sets deleted_at once, another status clears it.
func TestConversationStatus(t *testing.T) {
	s := newStack(t)
	s.start()
	const cid = "ac_status"
	s.client(cid, 1, &protocol.Configuration{}, map[string]any{"alicia.user_id": "user-1"})
	update := func(status, title *string) uint64 {
		return s.client(cid, 0, &protocol.ConversationUpdate{ConversationID: cid, Status: status, Title: title, UpdatedAt: time.Now().UnixMilli()}, nil)
	}
	read := func(seq uint64) (status, title string, deletedAt *time.Time) {
		s.history(cid, seq)
		err := s.pool.QueryRow(context.Background(), `SELECT status::text, COALESCE(title, ''), deleted_at FROM alicia_conversations WHERE id = $1`, cid).
			Scan(&status, &title, &deletedAt)
		if err != nil {
			t.Fatal(err)
		}
		return status, title, deletedAt
	}

	status, _, del := read(update(ptr("deleted"), nil))
	if status != "deleted" || del == nil {
		t.Fatalf("after delete: status %s deleted_at %v", status, del)
	}
	first := *del
	status, title, del := read(update(nil, ptr("Renamed while deleted")))
	if status != "deleted" || title != "Renamed while deleted" || del == nil || !del.Equal(first) {
		t.Fatalf("after rename: status %s title %q deleted_at %v, want the first deletion time %v", status, title, del, first)
	}
	status, _, del = read(update(ptr("archived"), nil))
	if status != "archived" || del != nil {
		t.Fatalf("after archive: status %s deleted_at %v", status, del)
	}
	status, _, del = read(update(ptr("active"), nil))
	if status != "active" || del != nil {
		t.Fatalf("after restore: status %s deleted_at %v", status, del)
	}
}

package persistence_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// ownedTables are digested to see that an envelope changed nothing at all.
var ownedTables = []string{"alicia_conversations", "alicia_messages", "alicia_sentences", "alicia_reasoning_steps",
	"alicia_tool_uses", "alicia_notes", "alicia_votes", "alicia_audio", "alicia_memory", "alicia_memory_used",
	"alicia_user_conversation_commentaries", "alicia_meta"}

func (s *stack) digest() string {
	s.t.Helper()
	var b strings.Builder
	for _, table := range ownedTables {
		var d string
		if err := s.pool.QueryRow(context.Background(), `SELECT COALESCE(md5(string_agg(t::text, '|' ORDER BY t::text)), '') FROM `+table+` t`).Scan(&d); err != nil {
			s.t.Fatal(err)
		}
		b.WriteString(table + "=" + d + " ")
	}
	return b.String()
}

// TestReferencesMustBeOwned: alice's envelopes naming rows of bob's
// conversation (his message, answer, sentence, note, tool use, memory,
// utterance) are dead-lettered, and no row of anyone changes.
func TestReferencesMustBeOwned(t *testing.T) {
	s := newStack(t)
	s.start()
	const bob, alice = "ac_bob", "ac_alice"
	bobMeta := map[string]any{"alicia.user_id": "bob"}
	aliceMeta := map[string]any{"alicia.user_id": "alice"}

	s.client(bob, 1, &protocol.Configuration{}, bobMeta)
	s.client(bob, 2, &protocol.UserMessage{ID: "am_b_user", ConversationID: bob, Content: "my secret plans"}, bobMeta)
	s.client(bob, 3, &protocol.MemoryAction{ID: "amact_b", Action: "create", Timestamp: 1,
		Memory: &protocol.MemoryActionMemory{ID: ptr("amem_b"), Content: "bob's bank pin is 1234"}}, bobMeta)
	s.client(bob, 4, &protocol.UserNote{ID: "an_b", MessageID: "am_b_user", Content: "bob's note", Category: "general", Action: "create", Timestamp: 1}, bobMeta)
	s.client(bob, 5, &protocol.AudioChunk{ConversationID: bob, Format: "pcm_s16le_16000", Sequence: 1, DurationMs: 20, Data: []byte{1, 2}},
		map[string]any{"alicia.user_id": "bob", "alicia.utterance_id": "am_b_user"})
	s.server(bob, &protocol.StartAnswer{ID: "am_b_ans", PreviousID: "am_b_user", ConversationID: bob}, nil)
	s.server(bob, &protocol.AssistantSentence{ID: ptr("ams_b1"), PreviousID: "am_b_ans", ConversationID: bob, Sequence: 1, Text: "Sure."}, nil)
	s.server(bob, &protocol.ReasoningStep{ID: "ar_b", MessageID: "am_b_ans", ConversationID: bob, Sequence: 1, Content: "thinking"}, nil)
	s.server(bob, &protocol.ToolUseRequest{ID: "atu_b", MessageID: "am_b_ans", ConversationID: bob, ToolName: "calculator",
		Parameters: map[string]any{"x": 1}, Execution: "client"}, nil)
	s.client(alice, 1, &protocol.Configuration{}, aliceMeta)
	s.history(alice, s.client(alice, 2, &protocol.UserMessage{ID: "am_a_user", ConversationID: alice, Content: "hi"}, aliceMeta))
	if n := s.queryInt(`SELECT count(*) FROM alicia_tool_uses WHERE id = 'atu_b' AND status = 'pending'`); n != 1 {
		t.Fatal("bob's tool use is not stored")
	}

	ctx := context.Background()
	dlq, err := s.js.OrderedConsumer(ctx, bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
	if err != nil {
		t.Fatal(err)
	}
	stanza := int32(10)
	cases := []struct {
		name string
		body protocol.Body
		meta map[string]any
		why  string // the reason, when not the guard's
	}{
		{"append text to his answer", &protocol.AssistantSentence{PreviousID: "am_b_ans", ConversationID: alice, Sequence: 2, Text: "pwned"}, nil, ""},
		{"a sentence id of his", &protocol.AssistantSentence{ID: ptr("ams_b1"), PreviousID: "am_a_user", ConversationID: alice, Sequence: 1, Text: "x"}, nil, "alicia_sentences_pkey"},
		{"reasoning on his answer", &protocol.ReasoningStep{ID: "ar_a", MessageID: "am_b_ans", ConversationID: alice, Sequence: 1, Content: "x"}, nil, ""},
		{"tool use on his answer", &protocol.ToolUseRequest{ID: "atu_a", MessageID: "am_b_ans", ConversationID: alice, ToolName: "calculator", Execution: "server"}, nil, ""},
		{"overwrite his tool result", &protocol.ToolUseResult{ID: "atr_a", RequestID: "atu_b", ConversationID: alice, Success: true, Result: "forged"}, nil, ""},
		{"note on his message", &protocol.UserNote{ID: "an_a", MessageID: "am_b_user", Content: "x", Category: "general", Action: "create", Timestamp: 1}, nil, ""},
		{"edit his note", &protocol.UserNote{ID: "an_b", MessageID: "am_a_user", Content: "edited", Category: "general", Action: "update", Timestamp: 1}, nil, ""},
		{"delete his note", &protocol.UserNote{ID: "an_b", MessageID: "am_a_user", Content: "", Category: "general", Action: "delete", Timestamp: 1}, nil, ""},
		{"vote on his answer", &protocol.Feedback{ID: "av_a", ConversationID: alice, MessageID: "am_b_ans", TargetType: "message", TargetID: "am_b_ans", Vote: "down", Timestamp: 1}, nil, ""},
		{"vote on his sentence", &protocol.Feedback{ID: "av_a2", ConversationID: alice, MessageID: "am_a_user", TargetType: "sentence", TargetID: "ams_b1", Vote: "down", Timestamp: 1}, nil, ""},
		{"audio into his utterance", &protocol.AudioChunk{ConversationID: alice, Format: "pcm_s16le_16000", Sequence: 2, DurationMs: 20, Data: []byte{9}},
			map[string]any{"alicia.utterance_id": "am_b_user"}, ""},
		{"transcription of his utterance", &protocol.Transcription{ID: "am_b_user", ConversationID: alice, Text: "forged", Final: true}, nil, ""},
		{"stop his answer", &protocol.ControlStop{ConversationID: alice, TargetID: ptr("am_b_ans")}, nil, ""},
		{"fail his answer", &protocol.ErrorMessage{ID: "aerr_a", ConversationID: alice, Code: 501, Message: "x", Severity: 2, OriginatingID: ptr("am_b_ans")}, nil, ""},
		{"trace of his memory", &protocol.MemoryTrace{ID: "amu_a", MessageID: "am_a_user", ConversationID: alice, MemoryID: "amem_b", Content: "x", Relevance: 0.9}, nil, ""},
		{"pin his memory", &protocol.MemoryAction{ID: "amact_a", Action: "pin", Timestamp: 1, Memory: &protocol.MemoryActionMemory{ID: ptr("amem_b"), Content: "x"}}, nil, ""},
		{"reply to his message", &protocol.UserMessage{ID: "am_a2", PreviousID: ptr("am_b_user"), ConversationID: alice, Content: "x"}, nil, ""},
		{"his message id", &protocol.UserMessage{ID: "am_b_user", ConversationID: alice, Content: "x"}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			before := s.digest()
			meta := map[string]any{"alicia.user_id": "alice"}
			for k, v := range c.meta {
				meta[k] = v
			}
			stanza++
			seq := s.client(alice, stanza, c.body, meta)
			s.history(alice, seq)
			if after := s.digest(); after != before {
				t.Errorf("rows changed:\nbefore %s\nafter  %s", before, after)
			}
			m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("not dead-lettered: %v", err)
			}
			if got := m.Headers().Get(bus.HeaderDLQSequence); got != strconv.FormatUint(seq, 10) {
				t.Fatalf("dead letter of sequence %s, want %d (%s)", got, seq, m.Headers().Get(bus.HeaderDLQReason))
			}
			why := c.why
			if why == "" {
				why = "another conversation or user"
			}
			if r := m.Headers().Get(bus.HeaderDLQReason); !strings.Contains(r, why) {
				t.Errorf("reason %q", r)
			}
		})
	}
	s.t = t

	// Alice's own envelopes still apply, published right after a bad one.
	s.client(alice, 100, &protocol.ControlStop{ConversationID: alice, TargetID: ptr("am_b_ans")}, aliceMeta)
	s.history(alice, s.client(alice, 101, &protocol.UserNote{ID: "an_a_ok", MessageID: "am_a_user", Content: "mine", Category: "general", Action: "create", Timestamp: 1}, aliceMeta))
	if n := s.queryInt(`SELECT count(*) FROM alicia_notes WHERE id = 'an_a_ok'`); n != 1 {
		t.Fatal("alice's own note was not stored")
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE id = 'am_b_ans' AND completion_status = 'streaming' AND contents = 'Sure.'`); n != 1 {
		t.Fatal("bob's answer changed")
	}
	// and her own note can be edited (the update used to fail on its category's type).
	s.history(alice, s.client(alice, 102, &protocol.UserNote{ID: "an_a_ok", MessageID: "am_a_user", Content: "edited", Category: "improvement", Action: "update", Timestamp: 2}, aliceMeta))
	if n := s.queryInt(`SELECT count(*) FROM alicia_notes WHERE id = 'an_a_ok' AND content = 'edited' AND category = 'improvement'`); n != 1 {
		t.Fatal("alice's note was not edited")
	}
}

package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

var snapshotTables = []string{
	"alicia_conversations", "alicia_messages", "alicia_sentences", "alicia_audio", "alicia_memory", "alicia_memory_used",
	"alicia_tool_uses", "alicia_reasoning_steps", "alicia_user_conversation_commentaries", "alicia_votes", "alicia_notes",
	"alicia_session_stats", "alicia_meta", "alicia_tools", "alicia_mcp_servers",
}

// snapshot returns every row of every table the envelopes write, as JSON, in a stable order.
func snapshot(t *testing.T, s *stack) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range snapshotTables {
		// Table names come from the constant list above, never from input.
		rows, err := s.pool.Query(context.Background(), fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t ORDER BY to_jsonb(t)::text`, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], r)
		}
		rows.Close()
	}
	return out
}

// TestRedeliveryChangesNothing consumes the whole stream twice: the second
// pass, with the consumer deleted and the stored offset forgotten, must
// leave the database exactly as the first pass did.
func TestRedeliveryChangesNothing(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { redeliveryChangesNothing(t, shards) })
	}
}

func redeliveryChangesNothing(t *testing.T, shards int) {
	s := newStack(t)
	s.cfg.Shards = shards
	s.start()
	for i := range 3 {
		f := publishFlow(s, fmt.Sprintf("ac_redeliver%d", i))
		finishFlow(s, f)
	}
	_, lastSys := publishChanges(s, "ac_changes")
	last := publishVoice(s, "ac_voice")
	s.history("ac_redeliver0", last)
	s.applied(bus.StreamConversations, last) // every partition, not only ac_redeliver0's
	s.applied(bus.StreamSystem, lastSys)
	before := snapshot(t, s)
	for table, want := range map[string]int{"alicia_sentences": 21, "alicia_tools": 4, "alicia_mcp_servers": 1, "alicia_memory": 8, "alicia_audio": 5} {
		if n := len(before[table]); n != want {
			t.Fatalf("first pass wrote %d rows in %s, want %d", n, table, want)
		}
	}

	s.stop() // its consumers go with it: the position is the database's
	ctx := context.Background()
	for _, stream := range []string{bus.StreamConversations, bus.StreamSystem} {
		if _, err := s.js.Consumer(ctx, stream, s.cfg.InstanceConsumer()); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("%s: the stopped instance's consumer: %v, want it deleted", stream, err)
		}
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM alicia_stream_offsets`); err != nil {
		t.Fatal(err)
	}
	s.start()
	s.history("ac_redeliver0", last)
	s.applied(bus.StreamConversations, last) // every partition, not only ac_redeliver0's
	s.applied(bus.StreamSystem, lastSys)
	after := snapshot(t, s)
	for _, table := range snapshotTables {
		if strings.Join(before[table], "\n") != strings.Join(after[table], "\n") {
			t.Errorf("%s changed on redelivery:\nbefore %v\nafter  %v", table, before[table], after[table])
		}
	}
}

// publishChanges publishes rows that change back and forth — conversation
// status and title, memories from both streams, the tool registry, an MCP
// server — and answers that end in each way. It returns the last
// CONVERSATIONS and SYSTEM sequences.
func publishChanges(s *stack, cid string) (last, lastSys uint64) {
	user := map[string]any{"alicia.user_id": "user-1"}
	stanza := int32(0)
	client := func(body protocol.Body) uint64 {
		stanza++
		return s.client(cid, stanza, body, user)
	}
	memory := func(action protocol.MemoryActionAction, id, content string, emb []float64, pinned *bool) *protocol.MemoryAction {
		return &protocol.MemoryAction{ID: "ama_" + id + "_" + string(action), Action: action, Timestamp: 1700000000000,
			Memory: &protocol.MemoryActionMemory{ID: &id, Content: content, Embedding: emb, EmbeddingModel: ptr("bge-m3"), Pinned: pinned}}
	}
	client(&protocol.UserMessage{ID: "am_u1_" + cid, ConversationID: cid, Content: "Tell me a story."})
	s.server(cid, &protocol.StartAnswer{ID: "am_a1_" + cid, PreviousID: "am_u1_" + cid, ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantMessage{ID: "am_a1_" + cid, ConversationID: cid, Content: "Once upon a time."}, nil)
	client(&protocol.UserMessage{ID: "am_u2_" + cid, ConversationID: cid, Content: "Another."})
	s.server(cid, &protocol.StartAnswer{ID: "am_a2_" + cid, PreviousID: "am_u2_" + cid, ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantSentence{PreviousID: "am_a2_" + cid, ConversationID: cid, Sequence: 1, Text: "A fox."}, nil)
	client(&protocol.ControlStop{ConversationID: cid, TargetID: ptr("am_a2_" + cid)})
	client(&protocol.UserMessage{ID: "am_u3_" + cid, ConversationID: cid, Content: "And?"})
	s.server(cid, &protocol.StartAnswer{ID: "am_a3_" + cid, PreviousID: "am_u3_" + cid, ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantSentence{PreviousID: "am_a3_" + cid, ConversationID: cid, Sequence: 1, Text: "Then"}, nil)
	s.server(cid, &protocol.ErrorMessage{ID: "ae_" + cid, ConversationID: cid, Code: protocol.CodeBackendUnavailable, Message: "down",
		OriginatingID: ptr("am_a3_" + cid), Recoverable: true, Severity: 2}, nil)
	for _, u := range []protocol.ConversationUpdate{
		{Title: ptr("Stories")}, {Status: ptr("archived")}, {Status: ptr("deleted")}, {Status: ptr("active"), Title: ptr("Fox stories")},
		{Status: ptr("archived")}, {Title: ptr("Stories")},
	} {
		u.ConversationID = cid
		client(&u)
	}

	c, d := embeddingOf(1), embeddingOf(2)
	for i, m := range []string{"amem_r1", "amem_r2"} {
		if i == 0 {
			client(memory(protocol.MemoryActionActionCreate, m, "C", nil, nil))
			s.system(memory(protocol.MemoryActionActionCreate, m, "C", c, nil), user)
		} else {
			s.system(memory(protocol.MemoryActionActionCreate, m, "C", c, nil), user)
			client(memory(protocol.MemoryActionActionCreate, m, "C", nil, nil))
		}
		client(memory(protocol.MemoryActionActionUpdate, m, "D", nil, nil))
		s.system(memory(protocol.MemoryActionActionUpdate, m, "D", d, nil), user)
		client(memory(protocol.MemoryActionActionPin, m, "D", nil, nil))
		client(memory(protocol.MemoryActionActionUpdate, m, "C", nil, ptr(false)))
		s.system(memory(protocol.MemoryActionActionUpdate, m, "C", c, ptr(false)), user)
		client(memory(protocol.MemoryActionActionPin, m, "C", nil, nil))
	}
	client(memory(protocol.MemoryActionActionCreate, "amem_r3", "E", nil, nil))
	client(memory(protocol.MemoryActionActionArchive, "amem_r3", "E", nil, nil))
	client(memory(protocol.MemoryActionActionCreate, "amem_r4", "F", nil, nil))
	last = client(memory(protocol.MemoryActionActionDelete, "amem_r4", "F", nil, nil))
	s.system(memory(protocol.MemoryActionActionCreate, "amem_r5", "G", c, nil), user)

	for _, b := range []protocol.Body{
		registration("builtin", "calculator", "web_search"),
		&protocol.ToolSetting{Name: "web_search", Enabled: false},
		registration("builtin", "calculator"),
		&protocol.ToolSetting{Name: "calculator", Enabled: false},
		&protocol.ToolSetting{Name: "calculator", Enabled: true},
		registration("builtin", "calculator", "web_search", "memory_query"),
		stdioServer("files"),
		&protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusConnecting},
		&protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusConnected},
		registration("mcp:files", "mcp_files_read"),
		&protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusError, LastError: ptr("broken pipe")},
		&protocol.MCPServerConfig{Name: "files", Action: protocol.MCPServerConfigActionDelete},
		stdioServer("files"),
		&protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusConnecting},
		registration("mcp:files", "mcp_files_read"),
		&protocol.MCPServerStatus{Name: "files", Status: protocol.MCPServerStatusStatusConnected},
		&protocol.ToolSetting{Name: "mcp_files_read", Enabled: false},
	} {
		lastSys = s.system(b, nil)
	}
	return last, lastSys
}

// publishVoice publishes voice turns cut by a barge-in (in stream order, and
// with audio and playout before their sentences), a playout that changes
// back and forth, and utterance audio in two orders. It returns the last
// CONVERSATIONS sequence.
func publishVoice(s *stack, prefix string) uint64 {
	v := newVoiceTurn(prefix + "0")
	v.publishInOrder(s)
	v.agent(s, 1, protocol.SentencePlayoutStatusInterrupted)
	v.agent(s, 1, protocol.SentencePlayoutStatusPlayed)
	newVoiceTurn(prefix + "1").publishReversed(s)
	u := utterance{cid: prefix + "2", id: "am_utt_" + prefix + "2"}
	u.chunks(s)
	u.transcription(s)
	u.message(s)
	u = utterance{cid: prefix + "3", id: "am_utt_" + prefix + "3"}
	u.transcription(s)
	u.message(s)
	return u.chunks(s)
}

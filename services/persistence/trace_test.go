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
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// traced is envelope meta carrying trace context (trace id, a fixed span id)
// and, as pairs, other keys.
func traced(trace string, kv ...any) map[string]any {
	m := map[string]any{"messaging.trace_id": trace, "messaging.span_id": spanID, "alicia.user_id": "user-1"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// traceOf returns the trace ids of every row of the five tables that keep
// one, by row id ("" = NULL).
func traceOf(t *testing.T, s *stack) map[string]string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `
		SELECT id, COALESCE(trace_id, '') FROM alicia_messages
		UNION ALL SELECT id, COALESCE(trace_id, '') FROM alicia_sentences
		UNION ALL SELECT id, COALESCE(trace_id, '') FROM alicia_tool_uses
		UNION ALL SELECT id, COALESCE(trace_id, '') FROM alicia_reasoning_steps
		UNION ALL SELECT id, COALESCE(trace_id, '') FROM alicia_memory_used`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var id, trace string
		if err := rows.Scan(&id, &trace); err != nil {
			t.Fatal(err)
		}
		out[id] = trace
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTraceIDColumn: the trace id an envelope carries is the trace_id column
// of the row it makes — message, sentence, tool use, reasoning step, memory
// trace — and neither it nor the span id is an alicia_meta row; other meta
// keys still are. No trace meta, or one that is not a valid trace id: NULL.
// A redelivery of the whole stream changes nothing.
func TestTraceIDColumn(t *testing.T) {
	const (
		cid         = "ac_trace"
		tUser       = "4bf92f3577b34da6a3ce929d0e0e4736"
		tMemory     = "5bf92f3577b34da6a3ce929d0e0e4736"
		tStart      = "6bf92f3577b34da6a3ce929d0e0e4736"
		tSentence   = "7bf92f3577b34da6a3ce929d0e0e4736"
		tAudio      = "8bf92f3577b34da6a3ce929d0e0e4736"
		tLate       = "9bf92f3577b34da6a3ce929d0e0e4736"
		tTool       = "abf92f3577b34da6a3ce929d0e0e4736"
		tResult     = "bbf92f3577b34da6a3ce929d0e0e4736"
		tReasoning  = "cbf92f3577b34da6a3ce929d0e0e4736"
		tComplete   = "dbf92f3577b34da6a3ce929d0e0e4736"
		tSecond     = "ebf92f3577b34da6a3ce929d0e0e4736"
		tSync       = "fbf92f3577b34da6a3ce929d0e0e4736"
		userMsg     = "am_tu"
		answer      = "am_ta"
		second      = "am_tb"
		memoryID    = "amem_t"
		toolUse     = "atu_t"
		memoryTrace = "amu_t"
	)
	s := newStack(t)
	s.start()
	user := map[string]any{"alicia.user_id": "user-1"}
	s.client(cid, 1, &protocol.Configuration{PreferredLanguage: ptr("en")}, user)
	s.client(cid, 2, &protocol.UserMessage{ID: userMsg, ConversationID: cid, Content: "Cook what?"}, traced(tUser, "source", "microphone"))
	s.client(cid, 3, &protocol.MemoryAction{ID: "ama_t", Action: "create", Timestamp: 1700000000000,
		Memory: &protocol.MemoryActionMemory{ID: ptr(memoryID), Content: "Has eggs"}}, traced(tMemory))
	s.server(cid, &protocol.MemoryTrace{ID: memoryTrace, MessageID: userMsg, ConversationID: cid, MemoryID: memoryID, Content: "Has eggs", Relevance: 0.9}, traced(tMemory))
	s.server(cid, &protocol.StartAnswer{ID: answer, PreviousID: userMsg, ConversationID: cid}, traced(tStart))
	s.server(cid, &protocol.AssistantSentence{ID: ptr("ams_t1"), PreviousID: answer, ConversationID: cid, Sequence: 1, Text: "Eggs."},
		traced(tSentence, "model", "qwen"))
	s.server(cid, &protocol.AssistantSentence{ID: ptr("ams_t2"), PreviousID: answer, ConversationID: cid, Sequence: 2, Text: "A frittata."}, nil)
	// Sentence 3's audio comes before the sentence: the row it makes has no
	// trace of its own; the sentence's comes with the sentence.
	s.publishOn(subjects.Agent(cid, protocol.TypeSentenceAudio), cid, &protocol.SentenceAudio{SentenceID: "ams_t3", MessageID: answer,
		ConversationID: cid, Sequence: 3, Format: "pcm_s16le_24000", DurationMs: 800, ByteSize: 38400}, traced(tAudio))
	s.server(cid, &protocol.AssistantSentence{ID: ptr("ams_t3"), PreviousID: answer, ConversationID: cid, Sequence: 3, Text: "Twenty minutes."}, traced(tLate))
	s.server(cid, &protocol.ToolUseRequest{ID: toolUse, MessageID: answer, ConversationID: cid, ToolName: "memory_query",
		Parameters: map[string]any{"query": "fridge"}, Execution: "server"}, traced(tTool))
	s.server(cid, &protocol.ToolUseResult{ID: "atr_t", RequestID: toolUse, ConversationID: cid, Success: true, Result: "eggs"}, traced(tResult))
	// Meta that is no valid trace id stores none.
	for i, bad := range []any{tReasoning, "00000000000000000000000000000000", strings.ToUpper(tReasoning), "zz", 42, tReasoning[:31]} {
		s.server(cid, &protocol.ReasoningStep{ID: fmt.Sprintf("ar_t%d", i), MessageID: answer, ConversationID: cid, Sequence: int32(i + 1),
			Content: "Think."}, map[string]any{"messaging.trace_id": bad})
	}
	// The AssistantMessage completing a streamed answer leaves its trace.
	s.server(cid, &protocol.AssistantMessage{ID: answer, ConversationID: cid, Content: "Eggs. A frittata. Twenty minutes."}, traced(tComplete))
	// An answer whose StartAnswer had none takes the completing one's.
	s.server(cid, &protocol.StartAnswer{ID: second, PreviousID: userMsg, ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantMessage{ID: second, ConversationID: cid, Content: "Or an omelette."}, traced(tSecond))
	// A message written offline: the edge publishes it as a UserMessage
	// with its localId (a SyncRequest itself makes no row).
	last := s.client(cid, 4, &protocol.UserMessage{ID: protocol.SyncedMessageID(cid, "local-1"), ConversationID: cid,
		Content: "Offline question", LocalID: protocol.Ptr("local-1"), Timestamp: protocol.Ptr(int64(1700000000000))}, traced(tSync))
	s.history(cid, last)

	var syncID string
	if err := s.pool.QueryRow(context.Background(), `SELECT id FROM alicia_messages WHERE local_id = 'local-1'`).Scan(&syncID); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		userMsg: tUser, memoryTrace: tMemory, answer: tStart, second: tSecond, syncID: tSync,
		"ams_t1": tSentence, "ams_t2": "", "ams_t3": tLate,
		toolUse: tTool,
		"ar_t0": tReasoning, "ar_t1": "", "ar_t2": "", "ar_t3": "", "ar_t4": "", "ar_t5": "",
	}
	got := traceOf(t, s)
	for id, w := range want {
		if g, ok := got[id]; !ok {
			t.Errorf("row %s missing", id)
		} else if g != w {
			t.Errorf("row %s: trace_id %q, want %q", id, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("rows with a trace_id column: %v, want %v", got, want)
	}

	if n := s.queryInt(`SELECT count(*) FROM alicia_meta WHERE key IN ('messaging.trace_id', 'messaging.span_id')`); n != 0 {
		t.Errorf("%d alicia_meta rows of trace context, want none", n)
	}
	for _, c := range []struct{ ref, key, value string }{
		{userMsg, "source", "microphone"}, {"ams_t1", "model", "qwen"}, {userMsg, "alicia.user_id", "user-1"},
	} {
		if n := s.queryInt(`SELECT count(*) FROM alicia_meta WHERE ref = $1 AND key = $2 AND value = $3`, c.ref, c.key, c.value); n != 1 {
			t.Errorf("meta %s %s = %s: %d rows, want 1", c.ref, c.key, c.value, n)
		}
	}
	// A trace leads to its rows (through the partial indexes).
	if n := s.queryInt(`SELECT (SELECT count(*) FROM alicia_messages WHERE trace_id = $1)
		+ (SELECT count(*) FROM alicia_sentences WHERE trace_id = $1) + (SELECT count(*) FROM alicia_tool_uses WHERE trace_id = $1)
		+ (SELECT count(*) FROM alicia_reasoning_steps WHERE trace_id = $1) + (SELECT count(*) FROM alicia_memory_used WHERE trace_id = $1)`,
		tMemory); n != 1 {
		t.Errorf("rows of trace %s: %d, want 1 (the memory trace)", tMemory, n)
	}

	// Redelivery of the whole stream, offsets forgotten: nothing changes.
	before := snapshot(t, s)
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
	s.history(cid, last)
	after := snapshot(t, s)
	for _, table := range snapshotTables {
		if strings.Join(before[table], "\n") != strings.Join(after[table], "\n") {
			t.Errorf("%s changed on redelivery:\nbefore %v\nafter  %v", table, before[table], after[table])
		}
	}
}

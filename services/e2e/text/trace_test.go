package text_test

import (
	"context"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/otlptest"
	"github.com/alicia-voice/alicia/services/memory"
)

// TestTraceOfATextTurn: with OTEL_EXPORTER_OTLP_ENDPOINT set, a text turn
// is one trace, sent over OTLP: the gateway's edge span is its root, the
// llm's turn its child, and under the turn the memory search (through the
// NATS request's traceparent header), answered from the search the memory
// service started under the edge span when the message was published, and
// the model request (with the model's name and tokens); persistence stores each of the turn's
// envelopes under the span that published it. The trace id is the one the
// envelopes carry and the one stored in the rows.
func TestTraceOfATextTurn(t *testing.T) {
	recv := otlptest.Setup(t)

	s := newStack(t, options{memory: func(c *memory.Config) { c.Threshold = 0.01 }})
	s.remember("alice", "The user's cat is called Miso.")
	s.chat.On(fakeopenai.LastUserContains("cat"), fakeopenai.Text("Your cat is called Miso."))
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("What is my cat called?")
	start, ss, _ := c.answer(uid)
	if textOf(ss) != "Your cat is called Miso." {
		t.Fatalf("answer %q", textOf(ss))
	}

	// The trace id the stored user message carries.
	var traceID string
	s.eventually("the user message's trace id", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT coalesce(trace_id, '') FROM alicia_messages WHERE id = $1`, uid).Scan(&traceID)
	})
	if len(traceID) != 32 {
		t.Fatalf("user message row trace_id %q", traceID)
	}
	var answerTrace string
	s.eventually("the answer's trace id", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT coalesce(trace_id, '') FROM alicia_messages WHERE id = $1 AND completion_status = 'completed'`, start.ID).Scan(&answerTrace)
	})
	if answerTrace != traceID {
		t.Fatalf("the answer row's trace %q is not the turn's %q", answerTrace, traceID)
	}

	want := []string{"edge.receive UserMessage", "llm.turn", "rpc " + rpc.MemorySearchSubject, "memory.search", "memory.prefetch", "llm.model_request",
		"persistence.store UserMessage", "persistence.store StartAnswer", "persistence.store AssistantSentence"}
	var byName otlptest.Spans
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		byName = recv.Trace(traceID)
		return byName.Missing(want...)
	}, "the turn's spans exported")

	parentIs := func(child, parent string) {
		t.Helper()
		if err := byName.ParentIs(child, parent); err != nil {
			t.Error(err)
		}
	}
	if root := byName["edge.receive UserMessage"]; len(root.ParentSpanId) != 0 {
		t.Errorf("the edge span has a parent %x: a turn's trace starts where its message enters", root.ParentSpanId)
	}
	parentIs("llm.turn", "edge.receive UserMessage")
	parentIs("rpc "+rpc.MemorySearchSubject, "llm.turn")
	// The llm asks the replica that began the search first, then
	// memory.search when that one no longer (or not yet) serves it: each
	// ask is an "rpc memory.search" span, and the answering one is
	// memory.search's parent.
	var asks []string
	for _, sp := range recv.All(traceID) {
		if sp.Name == "rpc "+rpc.MemorySearchSubject {
			asks = append(asks, hex.EncodeToString(sp.SpanId))
			if hex.EncodeToString(sp.ParentSpanId) != hex.EncodeToString(byName["llm.turn"].SpanId) {
				t.Errorf("an rpc memory.search span's parent is %x, not llm.turn", sp.ParentSpanId)
			}
		}
	}
	if p := hex.EncodeToString(byName["memory.search"].ParentSpanId); !slices.Contains(asks, p) {
		t.Errorf("memory.search's parent is %s, none of the rpc memory.search spans %v", p, asks)
	}
	// The memory service started the search when the message was
	// published; the turn's memory.search was answered from it.
	parentIs("memory.prefetch", "edge.receive UserMessage")
	if v := otlptest.Attr(byName["memory.search"], "alicia.memory.prefetch"); v.GetStringValue() != "hit" {
		t.Errorf("memory.search prefetch %v, want hit", v)
	}
	if v := otlptest.Attr(byName["memory.prefetch"], "alicia.message_id"); v.GetStringValue() != uid {
		t.Errorf("memory.prefetch message %v, want %s", v, uid)
	}
	parentIs("llm.model_request", "llm.turn")
	parentIs("persistence.store UserMessage", "edge.receive UserMessage")

	edge := byName["edge.receive UserMessage"]
	if v := otlptest.Attr(edge, "alicia.conversation_id"); v.GetStringValue() != c.cid {
		t.Errorf("edge span conversation %v, want %s", v, c.cid)
	}
	if v := otlptest.Attr(edge, "alicia.message_id"); v.GetStringValue() != uid {
		t.Errorf("edge span message %v, want %s", v, uid)
	}
	turn := byName["llm.turn"]
	if v := otlptest.Attr(turn, "alicia.turn_id"); v.GetStringValue() != start.ID {
		t.Errorf("llm.turn turn id %v, want %s", v, start.ID)
	}
	req := byName["llm.model_request"]
	if v := otlptest.Attr(req, "gen_ai.request.model"); v.GetStringValue() != "fake-chat" {
		t.Errorf("model request model %v, want fake-chat", v)
	}
	if v := otlptest.Attr(req, "gen_ai.usage.output_tokens"); v == nil || v.GetIntValue() <= 0 {
		t.Errorf("model request output tokens %v", v)
	}
	if d := req.EndTimeUnixNano - req.StartTimeUnixNano; d == 0 || req.StartTimeUnixNano < turn.StartTimeUnixNano || req.EndTimeUnixNano > turn.EndTimeUnixNano {
		t.Errorf("the model request (%d..%d) is not inside its turn (%d..%d)", req.StartTimeUnixNano, req.EndTimeUnixNano, turn.StartTimeUnixNano, turn.EndTimeUnixNano)
	}
	store := byName["persistence.store AssistantSentence"]
	if v := otlptest.Attr(store, "alicia.stream_sequence"); v.GetIntValue() <= 0 {
		t.Errorf("persistence span without the envelope's stream sequence: %v", v)
	}
}

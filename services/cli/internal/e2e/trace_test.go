package e2e_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/fakeopenai"
	"github.com/alicia-voice/alicia/services/memory"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf), as a collector or
// Jaeger serves it on /v1/traces: it keeps every span it is sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// trace is the spans of one trace id.
func (o *otlpReceiver) trace(id string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// TestTraceOfATextTurn: with OTEL_EXPORTER_OTLP_ENDPOINT set, a text turn
// is one trace, sent over OTLP: the gateway's edge span is its root, the
// llm's turn its child, and under the turn the memory search (through the
// NATS request's traceparent header) and the model request (with the
// model's name and tokens); persistence stores each of the turn's
// envelopes under the span that published it. The trace id is the one the
// envelopes carry and the one stored in the rows.
func TestTraceOfATextTurn(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: export soon after spans end
	shutdown, err := telemetry.SetupTracing(context.Background(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()

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

	want := []string{"edge.receive UserMessage", "llm.turn", "rpc " + rpc.MemorySearchSubject, "memory.search", "llm.model_request",
		"persistence.store UserMessage", "persistence.store StartAnswer", "persistence.store AssistantSentence"}
	byName := map[string]*tracepb.Span{}
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		spans := recv.trace(traceID)
		clear(byName)
		for _, sp := range spans {
			if byName[sp.Name] == nil {
				byName[sp.Name] = sp
			}
		}
		var missing []string
		for _, n := range want {
			if byName[n] == nil {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			var have []string
			for n := range byName {
				have = append(have, n)
			}
			return fmt.Errorf("trace %s lacks %s (has %s)", traceID, strings.Join(missing, ", "), strings.Join(have, ", "))
		}
		return nil
	}, "the turn's spans exported")

	parentIs := func(child, parent string) {
		t.Helper()
		c, p := byName[child], byName[parent]
		if hex.EncodeToString(c.ParentSpanId) != hex.EncodeToString(p.SpanId) {
			t.Errorf("%s's parent is %x, want %s (%x)", child, c.ParentSpanId, parent, p.SpanId)
		}
	}
	if root := byName["edge.receive UserMessage"]; len(root.ParentSpanId) != 0 {
		t.Errorf("the edge span has a parent %x: a turn's trace starts where its message enters", root.ParentSpanId)
	}
	parentIs("llm.turn", "edge.receive UserMessage")
	parentIs("rpc "+rpc.MemorySearchSubject, "llm.turn")
	parentIs("memory.search", "rpc "+rpc.MemorySearchSubject)
	parentIs("llm.model_request", "llm.turn")
	parentIs("persistence.store UserMessage", "edge.receive UserMessage")

	edge := byName["edge.receive UserMessage"]
	if v := attr(edge, "alicia.conversation_id"); v.GetStringValue() != c.cid {
		t.Errorf("edge span conversation %v, want %s", v, c.cid)
	}
	if v := attr(edge, "alicia.message_id"); v.GetStringValue() != uid {
		t.Errorf("edge span message %v, want %s", v, uid)
	}
	turn := byName["llm.turn"]
	if v := attr(turn, "alicia.turn_id"); v.GetStringValue() != start.ID {
		t.Errorf("llm.turn turn id %v, want %s", v, start.ID)
	}
	req := byName["llm.model_request"]
	if v := attr(req, "gen_ai.request.model"); v.GetStringValue() != "fake-chat" {
		t.Errorf("model request model %v, want fake-chat", v)
	}
	if v := attr(req, "gen_ai.usage.output_tokens"); v == nil || v.GetIntValue() <= 0 {
		t.Errorf("model request output tokens %v", v)
	}
	if d := req.EndTimeUnixNano - req.StartTimeUnixNano; d == 0 || req.StartTimeUnixNano < turn.StartTimeUnixNano || req.EndTimeUnixNano > turn.EndTimeUnixNano {
		t.Errorf("the model request (%d..%d) is not inside its turn (%d..%d)", req.StartTimeUnixNano, req.EndTimeUnixNano, turn.StartTimeUnixNano, turn.EndTimeUnixNano)
	}
	store := byName["persistence.store AssistantSentence"]
	if v := attr(store, "alicia.stream_sequence"); v.GetIntValue() <= 0 {
		t.Errorf("persistence span without the envelope's stream sequence: %v", v)
	}
}

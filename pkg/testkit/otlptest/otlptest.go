// Package otlptest is an in-process OTLP/HTTP trace receiver for tests: what
// a collector or Jaeger serves on /v1/traces (protobuf), keeping every span
// it is sent, so a test can assert the span tree of a turn.
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Setup starts a receiver and makes the process export its spans to it:
// the standard OTEL_* environment, then telemetry.SetupTracing, undone
// (and flushed) when the test ends. The services' spans go to it if they
// run in the test's process.
func Setup(t testing.TB) *Receiver {
	t.Helper()
	r := Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: export soon after spans end
	shutdown, err := telemetry.SetupTracing(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	return r
}

// Receiver keeps the spans exported to it.
type Receiver struct {
	URL string // http://127.0.0.1:port, for OTEL_EXPORTER_OTLP_ENDPOINT

	mu    sync.Mutex
	spans []*tracepb.Span
}

// Start serves a receiver on 127.0.0.1 until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (o *Receiver) serve(w http.ResponseWriter, r *http.Request) {
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

// Trace is the spans received with trace id id (hex), by name (the first
// of each name).
func (o *Receiver) Trace(id string) Spans {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := Spans{}
	for _, s := range o.spans {
		if hex.EncodeToString(s.TraceId) == id && out[s.Name] == nil {
			out[s.Name] = s
		}
	}
	return out
}

// All is every span received with trace id id (hex), in the order received:
// for the spans a trace has several of (one voice.playout per sentence).
func (o *Receiver) All(id string) []*tracepb.Span {
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

// Named is every span received named name, of any trace, in the order
// received: to find a span whose trace a test does not know.
func (o *Receiver) Named(name string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Spans of one trace by name.
type Spans map[string]*tracepb.Span

// Missing returns an error naming the spans of names the trace lacks.
func (s Spans) Missing(names ...string) error {
	var missing []string
	for _, n := range names {
		if s[n] == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var have []string
	for n := range s {
		have = append(have, n)
	}
	sort.Strings(have)
	return fmt.Errorf("the trace lacks %s (has %s)", strings.Join(missing, ", "), strings.Join(have, ", "))
}

// ParentIs reports whether child's parent span is parent.
func (s Spans) ParentIs(child, parent string) error {
	c, p := s[child], s[parent]
	if c == nil || p == nil {
		return fmt.Errorf("%s or %s missing", child, parent)
	}
	if hex.EncodeToString(c.ParentSpanId) != hex.EncodeToString(p.SpanId) {
		return fmt.Errorf("%s's parent is %x, want %s (%x)", child, c.ParentSpanId, parent, p.SpanId)
	}
	return nil
}

// Attr is the value of a span's attribute, nil without it.
func Attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

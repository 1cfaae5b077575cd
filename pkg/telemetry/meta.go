// Package telemetry carries OpenTelemetry trace context through protocol
// envelope meta and builds the per-conversation loggers every service uses.
package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// Meta keys that carry the trace context of an envelope.
const (
	MetaTraceID = "messaging.trace_id"
	MetaSpanID  = "messaging.span_id"
)

// InjectMeta returns a copy of meta carrying the span context of ctx; the
// caller's map is not modified. Without a valid span context meta is
// returned as is.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return meta
	}
	out := make(map[string]any, len(meta)+2)
	for k, v := range meta {
		out[k] = v
	}
	out[MetaTraceID] = sc.TraceID().String()
	out[MetaSpanID] = sc.SpanID().String()
	return out
}

// ExtractMeta returns ctx carrying the remote span context found in meta, so
// spans started from it join the producer's trace.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if sc, ok := SpanContextFromMeta(meta); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// SpanContextFromMeta parses the trace and span ids in meta.
func SpanContextFromMeta(meta map[string]any) (trace.SpanContext, bool) {
	ts, _ := meta[MetaTraceID].(string)
	ss, _ := meta[MetaSpanID].(string)
	if ts == "" || ss == "" {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(ts)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(ss)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

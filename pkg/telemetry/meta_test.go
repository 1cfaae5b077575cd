package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/telemetry"
)

func TestMetaRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	meta := telemetry.InjectMeta(ctx, map[string]any{"source": "microphone"})
	if meta[telemetry.MetaTraceID] != tid.String() || meta[telemetry.MetaSpanID] != sid.String() || meta["source"] != "microphone" {
		t.Fatalf("meta = %v", meta)
	}
	got := trace.SpanContextFromContext(telemetry.ExtractMeta(context.Background(), meta))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() {
		t.Fatalf("extracted %v", got)
	}
}

func TestMetaWithoutTrace(t *testing.T) {
	if m := telemetry.InjectMeta(context.Background(), nil); m != nil {
		t.Fatalf("InjectMeta without span = %v, want nil", m)
	}
	for name, meta := range map[string]map[string]any{
		"empty":     nil,
		"bad trace": {telemetry.MetaTraceID: "zz", telemetry.MetaSpanID: "b7ad6b7169203331"},
		"bad span":  {telemetry.MetaTraceID: "0af7651916cd43dd8448eb211c80319c", telemetry.MetaSpanID: 7},
	} {
		t.Run(name, func(t *testing.T) {
			if sc := trace.SpanContextFromContext(telemetry.ExtractMeta(context.Background(), meta)); sc.IsValid() {
				t.Fatalf("extracted %v from %v", sc, meta)
			}
		})
	}
}

package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/otlptest"
)

// earlyTracer is got before any SetupTracing, as packages get theirs at init.
var earlyTracer = otel.Tracer("github.com/alicia-voice/alicia/pkg/telemetry/test")

// A SetupTracing after another was shut down (a test after another, each
// with its own OTLP receiver, otlptest.Setup) gets the spans of tracers got
// before either: the otel global hands those to the first provider set, for
// good, so SetupTracing sets it once, to a provider that forwards.
func TestSetupTracingAgain(t *testing.T) {
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			recv := otlptest.Setup(t)
			_, early := earlyTracer.Start(context.Background(), "early")
			early.End()
			_, late := otel.Tracer("late").Start(context.Background(), "late")
			late.End()
			testkit.EventuallyNoError(t, 10*time.Second, func() error {
				if err := recv.Trace(early.SpanContext().TraceID().String()).Missing("early"); err != nil {
					return err
				}
				return recv.Trace(late.SpanContext().TraceID().String()).Missing("late")
			}, "the spans exported to this test's receiver")
		})
	}
}

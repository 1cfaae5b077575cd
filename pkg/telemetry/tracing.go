package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracingEnabled tells whether the standard OpenTelemetry environment asks
// for traces to be exported: an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none.
func TracingEnabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

var (
	tracingMu    sync.Mutex
	tracingUsers int
	tracingStop  func(context.Context) error
)

// SetupTracing installs the process's OpenTelemetry tracer provider and
// the W3C trace-context propagator, once per process (`alicia up` runs
// every service in one; each call must be paired with a call of the
// returned shutdown, and the last one flushes and stops the exporter).
//
// Spans always get real trace and span ids, so envelopes carry their
// trace id (envelope meta, the rows persistence writes) whether or not
// anything is exported. When TracingEnabled, spans are batched to the OTLP
// endpoint over HTTP/protobuf; every other OTEL_* variable (headers,
// timeout, compression, certificates, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER) is read by the SDK as the
// specification says. service names the process (service.name
// "alicia-<service>" unless OTEL_SERVICE_NAME says otherwise).
func SetupTracing(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	tracingMu.Lock()
	defer tracingMu.Unlock()
	release := func(ctx context.Context) error {
		tracingMu.Lock()
		defer tracingMu.Unlock()
		tracingUsers--
		if tracingUsers > 0 || tracingStop == nil {
			return nil
		}
		stop := tracingStop
		tracingStop = nil
		return stop(ctx)
	}
	if tracingUsers > 0 {
		tracingUsers++
		return release, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("alicia-"+service), semconv.ServiceNamespace("alicia")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: trace resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if TracingEnabled() {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	current.tp.Store(tp)
	globalOnce.Do(func() { otel.SetTracerProvider(&current) })
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tracingUsers = 1
	tracingStop = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx)
	}
	return release, nil
}

// The otel global tracer provider is set once per process, to current,
// which forwards to the SDK provider of the SetupTracing in force. The
// global hands a tracer got before it was set (a package's
// otel.Tracer(...) at init) to the first provider set, for good: a second
// SetupTracing after the first was shut down (a test after another, each
// with its OTLP receiver) must not leave those tracers with a stopped
// provider.
var (
	current    switchProvider
	globalOnce sync.Once
)

// switchProvider is a trace.TracerProvider whose tracers start spans with
// the SDK provider in tp: the latest SetupTracing's (stopped or not, as the
// global was before: a stopped one gives spans ids and exports nothing).
type switchProvider struct {
	embedded.TracerProvider
	tp atomic.Pointer[sdktrace.TracerProvider]
}

func (p *switchProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &switchTracer{p: p, name: name, opts: opts}
}

type switchTracer struct {
	embedded.Tracer
	p      *switchProvider
	name   string
	opts   []trace.TracerOption
	cached atomic.Pointer[boundTracer]
}

// boundTracer is a tracer of one SDK provider.
type boundTracer struct {
	tp *sdktrace.TracerProvider
	tr trace.Tracer
}

var noopTracer = noop.NewTracerProvider().Tracer("")

func (t *switchTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	tp := t.p.tp.Load()
	if tp == nil {
		return noopTracer.Start(ctx, name, opts...)
	}
	b := t.cached.Load()
	if b == nil || b.tp != tp {
		b = &boundTracer{tp: tp, tr: tp.Tracer(t.name, t.opts...)}
		t.cached.Store(b)
	}
	return b.tr.Start(ctx, name, opts...)
}

// InjectHeader writes the span context of ctx into the headers of a NATS
// message (a request of pkg/rpc): traceparent and tracestate, as over HTTP.
func InjectHeader(ctx context.Context, h map[string][]string) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(http.Header(h)))
}

// ExtractHeader returns ctx carrying the remote span context found in the
// headers of a NATS message.
func ExtractHeader(ctx context.Context, h map[string][]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(http.Header(h)))
}

// TraceID is the trace id of ctx's span, "" without one: for log lines.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

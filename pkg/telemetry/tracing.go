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
	return !TracingOff() && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "")
}

// TracingOff tells whether the standard OpenTelemetry environment turns
// the export off (OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none),
// whatever endpoint is given.
func TracingOff() bool {
	return strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none"
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
	return SetupServicesTracing(ctx, service, ServicesTracing{})
}

// ServicesTracing describes the services of a process that runs several
// (`alicia up`), each of which gets a tracer provider of its own, with the
// resource service.name "alicia-<service>", so that a trace viewer shows
// each service's spans under its own name, as when it runs alone. The
// providers share one batch span processor and OTLP exporter.
type ServicesTracing struct {
	// Services are the names of the services (as svcmain.Main names them:
	// gateway, llm, …, room-agent).
	Services []string
	// Endpoint, when set, is the OTLP/HTTP base URL (http://host:4318) the
	// spans go to instead of the one OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names, unless TracingOff: `alicia
	// up --traces` points them at its Jaeger so, without changing the
	// process's environment.
	Endpoint string
}

// ServiceScopePrefix starts the instrumentation scope of each service's
// own packages: a tracer named ServiceScopePrefix+"<service>" (or a
// package below it) belongs to that service.
const ServiceScopePrefix = "github.com/alicia-voice/alicia/services/"

type serviceKey struct{}

// WithService marks ctx, and the contexts made from it, as the named
// service's (for SetupServicesTracing: a process running several services
// passes each one's Run a context made with WithService).
func WithService(ctx context.Context, service string) context.Context {
	return context.WithValue(ctx, serviceKey{}, service)
}

// ServiceOf is the service WithService marked ctx with, "" without one.
func ServiceOf(ctx context.Context) string {
	s, _ := ctx.Value(serviceKey{}).(string)
	return s
}

// SetupServicesTracing is SetupTracing for a process that runs the
// services st names (`alicia up`, process "up"). Each span goes to the
// provider of one service, chosen in this order:
//
//  1. its tracer's scope: ServiceScopePrefix+"<service>" and the packages
//     below it are that service's (when st names it);
//  2. the service WithService marked the span's context with (the shared
//     packages, pkg/rpc, pkg/edge, on a service's behalf);
//  3. else the process's own provider, service.name "alicia-<process>".
//
// The services' providers read OTEL_RESOURCE_ATTRIBUTES like the process's
// but always name their service "alicia-<service>": OTEL_SERVICE_NAME (or a
// service.name among the attributes) names the process's provider only.
// Without services, it is SetupTracing. A call while tracing is set up
// shares the providers in place (whichever call made them).
func SetupServicesTracing(ctx context.Context, process string, st ServicesTracing) (shutdown func(context.Context) error, err error) {
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
	// One batch processor and exporter for every provider; stopped once,
	// after the providers.
	var shared sdktrace.SpanProcessor
	if st.Endpoint != "" && !TracingOff() || TracingEnabled() {
		var opts []otlptracehttp.Option
		if st.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(st.Endpoint, "/")+"/v1/traces"))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
		}
		shared = sdktrace.NewBatchSpanProcessor(exp)
	}
	newProvider := func(res *resource.Resource) *sdktrace.TracerProvider {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if shared != nil {
			opts = append(opts, sdktrace.WithSpanProcessor(keepOpen{shared}))
		}
		return sdktrace.NewTracerProvider(opts...)
	}
	res, err := traceResource(ctx, process)
	if err != nil {
		return nil, errors.Join(err, stopShared(ctx, shared))
	}
	set := &providerSet{def: newProvider(res), services: map[string]*sdktrace.TracerProvider{}}
	for _, svc := range st.Services {
		res, err := traceResource(ctx, svc)
		if err == nil {
			// The service's own name wins over the environment's.
			res, err = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName("alicia-"+svc)))
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: trace resource of %s: %w", svc, err), stopShared(ctx, shared))
		}
		set.services[svc] = newProvider(res)
	}
	current.set.Store(set)
	globalOnce.Do(func() { otel.SetTracerProvider(&current) })
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tracingUsers = 1
	tracingStop = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		errs := []error{set.def.Shutdown(ctx)}
		for _, tp := range set.services {
			errs = append(errs, tp.Shutdown(ctx))
		}
		if shared != nil {
			errs = append(errs, shared.Shutdown(ctx))
		}
		return errors.Join(errs...)
	}
	return release, nil
}

// stopShared stops the shared span processor of a setup that failed.
func stopShared(ctx context.Context, sp sdktrace.SpanProcessor) error {
	if sp == nil {
		return nil
	}
	return sp.Shutdown(ctx)
}

// traceResource is the resource of service's provider: service.name
// "alicia-<service>" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES
// say otherwise.
func traceResource(ctx context.Context, service string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("alicia-"+service), semconv.ServiceNamespace("alicia")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: trace resource: %w", err)
	}
	return res, nil
}

// keepOpen is the shared span processor as one provider sees it: a
// provider's Shutdown leaves it running for the others.
type keepOpen struct{ sdktrace.SpanProcessor }

func (keepOpen) Shutdown(context.Context) error { return nil }

// providerSet is what one SetupServicesTracing installed.
type providerSet struct {
	def      *sdktrace.TracerProvider
	services map[string]*sdktrace.TracerProvider
}

// The otel global tracer provider is set once per process, to current,
// which forwards to the SDK providers of the SetupTracing in force. The
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
// the SDK providers in set: the latest SetupTracing's (stopped or not, as
// the global was before: a stopped one gives spans ids and exports
// nothing).
type switchProvider struct {
	embedded.TracerProvider
	set atomic.Pointer[providerSet]
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

// boundTracer is the tracers of one scope in one providerSet: the one its
// scope names (own, else nil), the process's and each service's.
type boundTracer struct {
	set      *providerSet
	own      trace.Tracer
	def      trace.Tracer
	services map[string]trace.Tracer
}

var noopTracer = noop.NewTracerProvider().Tracer("")

func (t *switchTracer) bind(set *providerSet) *boundTracer {
	b := &boundTracer{set: set, def: set.def.Tracer(t.name, t.opts...), services: map[string]trace.Tracer{}}
	for svc, tp := range set.services {
		b.services[svc] = tp.Tracer(t.name, t.opts...)
	}
	if rest, ok := strings.CutPrefix(t.name, ServiceScopePrefix); ok {
		svc, _, _ := strings.Cut(rest, "/")
		b.own = b.services[svc]
	}
	return b
}

func (t *switchTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	set := t.p.set.Load()
	if set == nil {
		return noopTracer.Start(ctx, name, opts...)
	}
	b := t.cached.Load()
	if b == nil || b.set != set {
		b = t.bind(set)
		t.cached.Store(b)
	}
	tr := b.own
	if tr == nil {
		if svc := ServiceOf(ctx); svc != "" {
			tr = b.services[svc]
		}
	}
	if tr == nil {
		tr = b.def
	}
	return tr.Start(ctx, name, opts...)
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

package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// serviceReceiver is an OTLP/HTTP receiver keeping the service.name of
// each span it is sent, by span name.
type serviceReceiver struct {
	mu      sync.Mutex
	service map[string]string
}

func startServiceReceiver(t *testing.T) (*serviceReceiver, string) {
	t.Helper()
	r := &serviceReceiver{service: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			name := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					name = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.service[s.Name] = name
				}
			}
		}
		r.mu.Unlock()
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// expect polls until every span of want arrived with its service name.
func (r *serviceReceiver) expect(t *testing.T, want map[string]string) {
	t.Helper()
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for span, svc := range want {
			got, ok := r.service[span]
			if !ok {
				return fmt.Errorf("span %s not received", span)
			}
			if got != svc {
				return fmt.Errorf("span %s of service %q, want %q", span, got, svc)
			}
		}
		return nil
	}, "the spans with their service names")
}

// The tracers the services get at init, before any setup.
var (
	llmTracer   = otel.Tracer(telemetry.ServiceScopePrefix + "llm")
	rpcTracer   = otel.Tracer("github.com/alicia-voice/alicia/pkg/rpc")
	edgeTracer  = otel.Tracer("github.com/alicia-voice/alicia/pkg/edge")
	ttsTracer   = otel.Tracer(telemetry.ServiceScopePrefix + "tts")
	innerTracer = otel.Tracer(telemetry.ServiceScopePrefix + "persistence/internal/consume")
)

// TestSetupServicesTracing: in a process running several services (alicia
// up), each span is exported under its service's own service.name: by the
// scope of its tracer, else by the service its context was marked with,
// else the process's (which OTEL_SERVICE_NAME still names); the standalone
// SetupTracing names its one service as before.
func TestSetupServicesTracing(t *testing.T) {
	recv, url := startServiceReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", "my-up")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,deployment.environment=dev")

	shutdown, err := telemetry.SetupServicesTracing(context.Background(), "up", telemetry.ServicesTracing{
		Services: []string{"gateway", "llm", "persistence", "room-agent"},
	})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	persistenceCtx := telemetry.WithService(bg, "persistence")
	agentCtx := telemetry.WithService(bg, "room-agent")
	if s := telemetry.ServiceOf(context.WithoutCancel(agentCtx)); s != "room-agent" {
		t.Fatalf("ServiceOf a context made from the marked one: %q", s)
	}
	tracers := map[string]trace.Tracer{"llm": llmTracer, "rpc": rpcTracer, "edge": edgeTracer, "tts": ttsTracer, "inner": innerTracer}
	end := func(ctx context.Context, name, tracer string) {
		_, sp := tracers[tracer].Start(ctx, name)
		sp.End()
	}
	end(persistenceCtx, "llm's own, in a context of persistence's", "llm")
	end(persistenceCtx, "rpc for persistence", "rpc")
	end(agentCtx, "edge for the room-agent", "edge")
	end(bg, "edge unmarked", "edge")
	end(bg, "rpc unmarked", "rpc")
	end(bg, "tts, not run here", "tts")
	end(bg, "persistence's internal package", "inner")
	recv.expect(t, map[string]string{
		"llm's own, in a context of persistence's": "alicia-llm",
		"rpc for persistence":                      "alicia-persistence",
		"edge for the room-agent":                  "alicia-room-agent",
		"edge unmarked":                            "my-up",
		"rpc unmarked":                             "my-up",
		"tts, not run here":                        "my-up",
		"persistence's internal package":           "alicia-persistence",
	})
	if err := shutdown(bg); err != nil {
		t.Fatal(err)
	}

	// A standalone service: its name, unless the environment says otherwise.
	for _, env := range []struct{ name, want string }{{"", "alicia-gateway"}, {"custom", "custom"}} {
		t.Setenv("OTEL_SERVICE_NAME", env.name)
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
		shutdown, err := telemetry.SetupTracing(bg, "gateway")
		if err != nil {
			t.Fatal(err)
		}
		end(persistenceCtx, "standalone rpc "+env.want, "rpc")
		end(bg, "standalone llm scope "+env.want, "llm")
		recv.expect(t, map[string]string{"standalone rpc " + env.want: env.want, "standalone llm scope " + env.want: env.want})
		if err := shutdown(bg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServicesTracingEndpoint: an endpoint given in code (up's Jaeger)
// gets the spans instead of the one the environment names, which is left
// as it is; with the export turned off in the environment there is none.
func TestServicesTracingEndpoint(t *testing.T) {
	recv, url := startServiceReceiver(t)
	other, otherURL := startServiceReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otherURL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", otherURL+"/v1/traces")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	shutdown, err := telemetry.SetupServicesTracing(context.Background(), "up", telemetry.ServicesTracing{
		Services: []string{"llm"}, Endpoint: url,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, sp := llmTracer.Start(context.Background(), "to the endpoint in code")
	sp.End()
	recv.expect(t, map[string]string{"to the endpoint in code": "alicia-llm"})
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	other.mu.Lock()
	n := len(other.service)
	other.mu.Unlock()
	if n != 0 {
		t.Fatalf("the environment's endpoint got %d spans", n)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != otherURL {
		t.Fatal("the environment's endpoint changed")
	}

	// Off: shutting down flushes whatever an exporter would hold, and the
	// endpoint got nothing.
	t.Setenv("OTEL_SDK_DISABLED", "true")
	off, offURL := startServiceReceiver(t)
	shutdown, err = telemetry.SetupServicesTracing(context.Background(), "up", telemetry.ServicesTracing{
		Services: []string{"llm"}, Endpoint: offURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, sp = llmTracer.Start(context.Background(), "not exported")
	sp.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	off.mu.Lock()
	defer off.mu.Unlock()
	if !telemetry.TracingOff() || len(off.service) != 0 {
		t.Fatalf("OTEL_SDK_DISABLED=true: %d spans exported", len(off.service))
	}
}

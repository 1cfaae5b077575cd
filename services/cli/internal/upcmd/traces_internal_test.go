package upcmd

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/jaeger"
)

// TestTracesLine: without --traces the banner names the OTLP endpoint of
// the environment, or says nothing when spans are not exported.
func TestTracesLine(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME"} {
		t.Setenv(k, "")
	}
	if d := (tracesStack{}).describe(); d != "" {
		t.Fatalf("no endpoint: %q, want no line", d)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	const names = "services alicia-<service>: persistence memory llm gateway asr tts room-agent"
	if d := (tracesStack{}).describe(); d != "OTLP to http://collector:4318 ("+names+")" {
		t.Fatalf("external endpoint: %q", d)
	}
	// OTEL_SERVICE_NAME names no service of up's (only spans none of them
	// started, telemetry.SetupServicesTracing).
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://tempo:4318/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "my-alicia")
	if d := (tracesStack{}).describe(); !strings.HasPrefix(d, "OTLP to http://tempo:4318/v1/traces ("+names+")") {
		t.Fatalf("traces endpoint and service name: %q", d)
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if d := (tracesStack{}).describe(); d != "" {
		t.Fatalf("SDK disabled: %q, want no line", d)
	}
}

// TestTracesLineWithJaeger: with --traces the line names Jaeger's URL and
// what its page shows (the embedded viewer, or the UI directory set).
func TestTracesLineWithJaeger(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	srv := &jaeger.Server{UIURL: "http://127.0.0.1:16686", OTLPHTTPURL: "http://127.0.0.1:4318", OTLPGRPCAddr: "127.0.0.1:4317",
		LogPath: "/data/jaeger/jaeger.log", UIAssets: "/data/jaeger/ui", EmbeddedUI: true}
	d := (tracesStack{server: srv}).describe()
	if !strings.HasPrefix(d, "http://127.0.0.1:16686 (Jaeger "+jaeger.Version+", in memory, services alicia-<service>: persistence memory llm gateway asr tts room-agent;") ||
		!strings.Contains(d, "lists the recent traces") || strings.Contains(d, "placeholder") {
		t.Fatalf("embedded viewer: %q", d)
	}
	srv.UIAssets, srv.EmbeddedUI = "/srv/jaeger-ui", false
	if d := (tracesStack{server: srv, replaced: "http://collector:4318"}).describe(); !strings.Contains(d, "its page is the UI of /srv/jaeger-ui") ||
		!strings.Contains(d, "instead of http://collector:4318") {
		t.Fatalf("UI assets set: %q", d)
	}
}

package upcmd

import (
	"strings"
	"testing"
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
	if d := (tracesStack{}).describe(); d != "OTLP to http://collector:4318 (service alicia-up)" {
		t.Fatalf("external endpoint: %q", d)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://tempo:4318/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "my-alicia")
	if d := (tracesStack{}).describe(); !strings.HasPrefix(d, "OTLP to http://tempo:4318/v1/traces (service my-alicia)") {
		t.Fatalf("traces endpoint and service name: %q", d)
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if d := (tracesStack{}).describe(); d != "" {
		t.Fatalf("SDK disabled: %q, want no line", d)
	}
}

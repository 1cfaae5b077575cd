package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// probePaths are each service's probe endpoints: live answers while the
// process serves HTTP (startup and liveness, whose failures restart the
// container: never on a dependency's outage), ready checks NATS, the
// consumers and Postgres (readiness). TestLivenessEndpoints checks the
// services' code still means that.
var probePaths = map[string]struct{ live, ready string }{
	"gateway":     {"/livez", "/readyz"},
	"persistence": {"/livez", "/healthz"},
	"llm":         {"/livez", "/healthz"},
	"memory":      {"/livez", "/healthz"},
	"asr":         {"/livez", "/healthz"},
	"tts":         {"/livez", "/healthz"},
	"room-agent":  {"/livez", "/healthz"},
}

// TestLivenessEndpoints: the endpoint the chart's startup and liveness
// probes use (probePaths) still checks nothing but that the process serves
// HTTP, so a Postgres failover or a NATS outage restarts no pod: every
// service's metrics server (pkg/telemetry ServeMetrics) and the gateway
// answer GET /livez with telemetry.Live, which checks no dependency.
func TestLivenessEndpoints(t *testing.T) {
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	metrics := read("pkg/telemetry/metrics.go")
	if !strings.Contains(metrics, `mux.HandleFunc("GET /livez", Live)`) {
		t.Error("pkg/telemetry/metrics.go: ServeMetrics no longer serves GET /livez with Live; the chart's liveness probes (probePaths) must use an endpoint that checks no dependency")
	}
	live := regexp.MustCompile(`(?s)func Live\(w http\.ResponseWriter, _ \*http\.Request\) \{(.*?)\n\}`).FindStringSubmatch(metrics)
	if live == nil || strings.Contains(live[1], "check") || strings.Contains(live[1], "Ping") {
		t.Error("pkg/telemetry/metrics.go: Live is gone or checks something; liveness must not depend on NATS or Postgres")
	}
	if !strings.Contains(read("services/gateway/run.go"), `e.GET("/livez", echo.WrapHandler(http.HandlerFunc(telemetry.Live)))`) {
		t.Error("services/gateway/run.go: the gateway no longer answers GET /livez with telemetry.Live")
	}
}

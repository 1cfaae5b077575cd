package check

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
	"gateway":     {"/healthz", "/readyz"},
	"persistence": {"/metrics", "/healthz"},
	"llm":         {"/metrics", "/healthz"},
	"memory":      {"/metrics", "/healthz"},
	"asr":         {"/metrics", "/healthz"},
	"tts":         {"/metrics", "/healthz"},
	"room-agent":  {"/metrics", "/healthz"},
}

// metricsWorstSeconds is how long GET /metrics may take while NATS does
// not answer: pkg/telemetry's consumer lag waits up to 2 s for each stream
// it reads, and persistence reads three (CONVERSATIONS, SYSTEM, DEADLETTER).
const metricsWorstSeconds = 6

// TestLivenessEndpoints: the endpoints the chart's startup and liveness
// probes use (probePaths) still check nothing but that the process serves
// HTTP, so a Postgres failover or a NATS outage restarts no pod: the
// gateway's /healthz answers "ok" without a check, and the other services'
// /metrics is the Prometheus handler. When the services get a /livez (which
// they lack: ServeMetrics serves /healthz with the dependency checks and
// /metrics only), this fails to have the chart move to it.
func TestLivenessEndpoints(t *testing.T) {
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gateway := read("services/gateway/run.go")
	if !regexp.MustCompile(`e\.GET\("/healthz", func\(c echo\.Context\) error \{\s*return c\.String\(http\.StatusOK, "ok"\)\s*\}\)`).MatchString(gateway) {
		t.Error(`services/gateway/run.go: GET /healthz no longer answers "ok" without checks; the chart's liveness probe of the gateway (probePaths) must use an endpoint that does`)
	}
	metrics := read("pkg/telemetry/metrics.go")
	if !strings.Contains(metrics, `mux.Handle("GET /metrics", promhttp.Handler())`) {
		t.Error("pkg/telemetry/metrics.go: ServeMetrics no longer serves GET /metrics with the Prometheus handler alone; the chart's liveness probes (probePaths) must use an endpoint that checks no dependency")
	}
	for file, text := range map[string]string{"pkg/telemetry/metrics.go": metrics, "services/gateway/run.go": gateway} {
		if strings.Contains(text, `/livez`) {
			t.Errorf("%s serves /livez now: make it the chart's liveness and startup path (probePaths, the templates' live paths, README)", file)
		}
	}
}

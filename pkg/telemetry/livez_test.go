package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestLivez: /livez answers while /healthz fails on a dependency, so a
// liveness probe on it restarts nothing during an outage.
func TestLivez(t *testing.T) {
	addr := testkit.FreeAddr(t)
	down := telemetry.HealthCheck{Name: "postgres", Check: func(context.Context) error { return errors.New("failover") }}
	stop, err := telemetry.ServeMetrics(addr, false, zerolog.Nop(), down)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code == http.StatusOK {
		t.Fatal("/healthz answered 200 with postgres down")
	}
	if code, body := get("/livez"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/livez: %d %q", code, body)
	}
}

package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

type conn struct{ up atomic.Bool }

func (c *conn) IsConnected() bool { return c.up.Load() }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func TestHealthz(t *testing.T) {
	addr := testkit.FreeAddr(t)
	nc := &conn{}
	var consumerGone atomic.Bool
	consumerGone.Store(true)
	stop, err := telemetry.ServeMetrics(addr, false, zerolog.Nop(),
		telemetry.NATSConnected(nc),
		telemetry.HealthCheck{Name: "consumer tts", Check: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("check run without a deadline")
			}
			if consumerGone.Load() {
				return errors.New("consumer not found")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	code, body := get(t, "http://"+addr+"/healthz")
	if code != http.StatusServiceUnavailable || body != "nats: not connected\nconsumer tts: consumer not found" {
		t.Fatalf("both checks failing: %d %q", code, body)
	}
	nc.up.Store(true)
	code, body = get(t, "http://"+addr+"/healthz")
	if code != http.StatusServiceUnavailable || body != "consumer tts: consumer not found" {
		t.Fatalf("consumer check failing: %d %q", code, body)
	}
	consumerGone.Store(false)
	if code, body = get(t, "http://"+addr+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("healthy: %d %q", code, body)
	}
}

func TestHealthzWithoutChecks(t *testing.T) {
	addr := testkit.FreeAddr(t)
	stop, err := telemetry.ServeMetrics(addr, false, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if code, body := get(t, "http://"+addr+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("no checks: %d %q", code, body)
	}
}

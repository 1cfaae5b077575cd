package asr_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/fakeopenai"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the replica consumes ASR_JOBS (a deleted consumer is made again),
// unhealthy (naming why) when NATS is gone.
func TestHealthz(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(fakeopenai.New(t))
	// The free port is picked once the test's other servers listen, so
	// none of them can be handed the same one.
	addr := testkit.FreeAddr(t)
	cfg.MetricsAddr = addr
	h.replica(cfg)
	healthz := func(want int, wantBody string) func() error {
		return testkit.Answers("http://"+addr+"/healthz", want, wantBody)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy")
	if err := h.js.DeleteConsumer(context.Background(), bus.StreamASRJobs, cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy again with the consumer made again")
	h.ns.Shutdown()
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "nats: not connected"), "unhealthy without NATS")
}

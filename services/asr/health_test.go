package asr_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
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
	// The job queue's depth, read from the server at the scrape: what an
	// autoscaler of asr workers reads.
	queue := fmt.Sprintf(`alicia_jetstream_consumer_pending_messages{consumer=%q,stream=%q} 0`, cfg.Consumer, bus.StreamASRJobs)
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(body), queue) {
			return fmt.Errorf("/metrics has no %s", queue)
		}
		return nil
	}, "queue depth exported")
	if err := h.js.DeleteConsumer(context.Background(), bus.StreamASRJobs, cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy again with the consumer made again")
	h.ns.Shutdown()
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "nats: not connected"), "unhealthy without NATS")
}

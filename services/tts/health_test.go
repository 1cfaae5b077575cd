package tts_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/tts"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the service consumes, unhealthy (naming why) when its consumer is gone.
func TestHealthz(t *testing.T) {
	addr := testkit.FreeAddr(t)
	h := newHarness(t, func(c *tts.Config) { c.MetricsAddr = addr })
	healthz := func(want int, wantBody string) func() error {
		return testkit.Answers("http://"+addr+"/healthz", want, wantBody)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy")
	if err := h.js.DeleteConsumer(context.Background(), bus.StreamConversations, h.cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "consumer "+bus.StreamConversations+"/"+h.cfg.Consumer),
		"unhealthy without its consumer")
}

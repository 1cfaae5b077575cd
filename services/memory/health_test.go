package memory_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/memory"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the service consumes, unhealthy (naming why) when a consumer it reads
// is gone.
func TestHealthz(t *testing.T) {
	addr := testkit.FreeAddr(t)
	s := newStack(t, stackOptions{config: func(c *memory.Config) { c.MetricsAddr = addr }})
	healthz := func(want int, wantBody string) func() error {
		return testkit.Answers("http://"+addr+"/healthz", want, wantBody)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy")
	if err := s.js.DeleteConsumer(context.Background(), bus.StreamConversations, s.cfg.ExtractionConsumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "consumer "+bus.StreamConversations+"/"+s.cfg.ExtractionConsumer),
		"unhealthy without its extraction consumer")
}

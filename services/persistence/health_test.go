package persistence_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the service consumes both streams, unhealthy (naming why) when a
// consumer is gone.
func TestHealthz(t *testing.T) {
	addr := testkit.FreeAddr(t)
	s := newStack(t)
	s.cfg.MetricsAddr = addr
	s.start()
	healthz := func(want int, wantBody string) func() error {
		return testkit.Answers("http://"+addr+"/healthz", want, wantBody)
	}
	testkit.EventuallyNoError(t, 20*time.Second, healthz(http.StatusOK, "ok"), "healthy")
	if err := s.js.DeleteConsumer(context.Background(), bus.StreamSystem, s.cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "consumer "+bus.StreamSystem+"/"+s.cfg.Consumer),
		"unhealthy without its consumer")
}

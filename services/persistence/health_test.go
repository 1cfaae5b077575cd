package persistence_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the service renews its partition leases, unhealthy (naming why)
// once it could not for a whole lease, healthy again when it can.
func TestHealthz(t *testing.T) {
	addr := testkit.FreeAddr(t)
	s := newStack(t)
	s.cfg.MetricsAddr = addr
	s.cfg.LeaseTTL = time.Second
	s.start()
	healthz := func(want int, wantBody string) func() error {
		return testkit.Answers("http://"+addr+"/healthz", want, wantBody)
	}
	testkit.EventuallyNoError(t, 20*time.Second, healthz(http.StatusOK, "ok"), "healthy")

	// The instances table locked: the heartbeats wait, the leases age.
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE alicia_persistence_instances IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "leases"), "unhealthy while its leases are not renewed")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy again")
}

// Package persistencetest runs the real persistence service for other
// services' tests: they publish envelopes and read what it wrote.
package persistencetest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/persistence"
)

// Start runs persistence against the NATS server at natsURL and the
// database at pgURL until the test ends (a failure of the service fails the
// test), and returns once it answers persistence.applied. configure, when
// given, adjusts the configuration first.
func Start(t testing.TB, natsURL, pgURL string, configure ...func(*persistence.Config)) {
	t.Helper()
	cfg := persistence.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL = natsURL, pgURL
	for _, f := range configure {
		f(&cfg)
	}
	svc := testkit.Go(t, "persistence", func(ctx context.Context) error { return persistence.Run(ctx, cfg, zerolog.Nop()) })
	nc, err := nats.Connect(natsURL, nats.Name("persistencetest"))
	if err != nil {
		t.Fatalf("persistencetest: %v", err)
	}
	defer nc.Close()
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		select {
		case <-svc.Exited():
			t.Fatalf("persistence stopped: %v", svc.Err())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return rpc.WaitApplied(ctx, nc, bus.StreamConversations, 0)
	}, "persistence ready")
}

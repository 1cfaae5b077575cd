// Package stacktest runs the real gateway with embedded NATS, a fresh
// Postgres database and persistence, in-process, for the CLI's end-to-end
// tests.
package stacktest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

// API keys of the stack's two users.
const (
	AliceKey = "alice-cli-key-0123456789"
	BobKey   = "bob-cli-key-0123456789ab"
)

// Stack is a running gateway and what it stands on.
type Stack struct {
	Base string         // http://127.0.0.1:port
	Pool *pgxpool.Pool  // the database persistence writes
	Pub  *bus.Publisher // publishes as the other services would
}

// Start runs NATS, Postgres, persistence and the gateway until the test ends.
func Start(t *testing.T) *Stack {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	pgURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	persistencetest.Start(t, ns.ClientURL(), pgURL)
	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL = "127.0.0.1:0", ns.ClientURL(), pgURL
	gcfg.APIKeys = "alice:" + AliceKey + ",bob:" + BobKey
	gcfg.RateLimit = 1000
	addr := make(chan string, 1)
	svc := testkit.Go(t, "gateway", func(ctx context.Context) error {
		return gateway.Run(ctx, gcfg, zerolog.Nop(), func(a string) { addr <- a })
	})
	select {
	case a := <-addr:
		return &Stack{Base: "http://" + a, Pool: pool, Pub: bus.NewPublisher(js)}
	case <-svc.Exited():
		t.Fatalf("gateway: %v", svc.Err())
	}
	return nil
}

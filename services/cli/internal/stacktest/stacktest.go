// Package stacktest runs the real gateway with embedded NATS, a fresh
// Postgres database and persistence, in-process, for the CLI's end-to-end
// tests; an llm replica doing optimisation runs on demand.
package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

// API keys of the stack's users: two people and an administrator
// (ALICIA_ADMIN_USERS=admin).
const (
	AliceKey = "alice-cli-key-0123456789"
	BobKey   = "bob-cli-key-0123456789ab"
	AdminKey = "admin-cli-key-0123456789"
)

// Stack is a running gateway and what it stands on.
type Stack struct {
	Base string         // http://127.0.0.1:port
	Pool *pgxpool.Pool  // the database persistence writes
	Pub  *bus.Publisher // publishes as the other services would

	natsURL, pgURL string
	js             jetstream.JetStream
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
	gcfg.APIKeys = "alice:" + AliceKey + ",bob:" + BobKey + ",admin:" + AdminKey
	gcfg.AdminUsers = "admin"
	gcfg.RateLimit = 1000
	addr := make(chan string, 1)
	svc := testkit.Go(t, "gateway", func(ctx context.Context) error {
		return gateway.Run(ctx, gcfg, zerolog.Nop(), func(a string) { addr <- a })
	})
	select {
	case a := <-addr:
		return &Stack{Base: "http://" + a, Pool: pool, Pub: bus.NewPublisher(js), natsURL: ns.ClientURL(), pgURL: pgURL, js: js}
	case <-svc.Exited():
		t.Fatalf("gateway: %v", svc.Err())
	}
	return nil
}

// StartOptimizer runs an llm replica that does prompt optimisation runs
// only (ALICIA_OPTIMIZER=only: no turns, no judge) against a fake model
// that answers nothing in particular, until the test ends; it returns
// once the optimisers' consumer exists.
func (s *Stack) StartOptimizer(t *testing.T) {
	t.Helper()
	fake := fakeopenai.New(t)
	cfg := llm.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL, cfg.LLMURL, cfg.Model = s.natsURL, s.pgURL, fake.URL(), "fake-chat"
	cfg.Optimizer.Enabled, cfg.Optimizer.Only = true, true
	cfg.Judge.Sample = 0
	cfg.Titles = false // its requests would take the fakes' scripted answers
	cfg.ShutdownGrace = 0
	svc := testkit.Go(t, "llm", func(ctx context.Context) error { return llm.Run(ctx, cfg, zerolog.Nop()) })
	// The optimiser's worker waits on a 30 s pull that does not hear its
	// context end (services/llm/internal/optimize/worker.go): removing its
	// consumer first (cleanups run last-registered first) ends the pull at
	// once, so the llm stops without holding the test for 30 s.
	t.Cleanup(func() {
		_ = s.js.DeleteConsumer(context.Background(), bus.StreamSystem, optimizerConsumer)
	})
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		select {
		case <-svc.Exited():
			t.Fatalf("llm: %v", svc.Err())
		default:
		}
		_, err := s.js.Consumer(context.Background(), bus.StreamSystem, optimizerConsumer)
		return err
	}, "the optimisers' consumer")
}

// optimizerConsumer is the llm's optimisers' durable consumer on SYSTEM.
const optimizerConsumer = "llm-optimize"

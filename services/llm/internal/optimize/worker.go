package optimize

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// ConsumerName is the optimisers' durable consumer on SYSTEM (filter
// alicia.sys.optimization_run), shared by every llm replica that runs the
// optimiser (pkg/natsauth lists it).
const ConsumerName = "llm-optimize"

// CancelSubject is where the gateway asks, on core NATS, for a run to be
// cancelled (the body is the run's id); the replica doing it stops it.
const CancelSubject = subjects.OptimizeCancel

// Worker consumption tuning.
const (
	// workerAckWait: a run held longer without a sign of life is given to
	// another replica; the worker marks it in progress every third of it.
	workerAckWait = 2 * time.Minute
	// workerMaxDeliver: tries of one run (a replica that dies in the middle
	// hands it on; after the last, it is dead-lettered).
	workerMaxDeliver = 3
	// workerMaxAckPending: runs in progress at once over every replica.
	workerMaxAckPending = 8
	// pullWait: how long one pull waits for a run.
	pullWait = time.Second
)

// Run statuses as stored (prompt_optimization_runs.status).
const (
	StatusQueued = "queued"
)

// Worker takes optimisation runs from the bus one at a time and does them
// with Runner: low priority (its model requests wait for this replica's
// turns, Gate), cancellable (CancelSubject), handed back whole when the
// service stops. A run already ended (done, failed, cancelled: read from
// Postgres) is acknowledged without being done again, so a redelivery
// or a consumer created over the stream's history never repeats one.
type Worker struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// Runner does one run (one at a time: its Adapter keeps the run's
	// answers).
	Runner *Runner
	// Status reads a run's stored status ("" or StatusQueued when
	// persistence has not stored it yet).
	Status func(ctx context.Context, id string) (string, error)
	// MaxBudget bounds a run's metric calls (ALICIA_OPTIMIZER_MAX_BUDGET).
	MaxBudget int
	Log       zerolog.Logger

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
}

// errCancelled is the cause of a run's context when a person cancelled it.
var errCancelled = errors.New("optimize: cancelled")

// Run consumes runs until ctx ends; the run in progress is then handed
// back (another replica does it again from the start).
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.JS.CreateOrUpdateConsumer(ctx, bus.StreamSystem, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "llm: prompt optimisation runs",
		FilterSubject: subjects.System(protocol.TypeOptimizationRun),
		// Every run ever asked for: those already ended are skipped by
		// their stored status.
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       workerAckWait,
		MaxDeliver:    workerMaxDeliver,
		MaxAckPending: workerMaxAckPending,
	})
	if err != nil {
		return fmt.Errorf("optimize: consumer %s: %w", ConsumerName, err)
	}
	w.mu.Lock()
	w.running = map[string]context.CancelCauseFunc{}
	w.mu.Unlock()
	sub, err := w.NC.Subscribe(CancelSubject, func(m *nats.Msg) { w.cancel(string(m.Data)) })
	if err != nil {
		return fmt.Errorf("optimize: subscribe %s: %w", CancelSubject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	r := bus.NewRouter(ConsumerName, bus.NewDeadLetters(w.JS), w.Log, bus.WithMaxDeliver(workerMaxDeliver))
	bus.Handle(r, func(ctx context.Context, _ protocol.Envelope, run *protocol.OptimizationRun, d bus.Delivery) error {
		return w.do(ctx, run)
	})
	for ctx.Err() == nil {
		// A short pull: a stopping service waits for it to end (nats.go's
		// Next does not hear ctx), and another replica takes a run as soon
		// as this one is busy.
		m, err := cons.Next(bus.NextOpts(pullWait)...)
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoHeartbeat) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.Log.Warn().Err(err).Msg("optimiser: next run")
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		w.handle(ctx, r, m)
	}
	return nil
}

// handle does one delivery, marking it in progress while it runs.
func (w *Worker) handle(ctx context.Context, r *bus.Router, m jetstream.Msg) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(workerAckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	defer close(done)
	r.HandleMsg(ctx, m)
}

// do does run unless it already ended. The router acks a nil, gives the
// run back on ErrShutdown (ctx ends), dead-letters a Permanent error.
func (w *Worker) do(ctx context.Context, run *protocol.OptimizationRun) error {
	log := w.Log.With().Str("run", run.ID).Str("scope", string(run.Scope)).Logger()
	status, err := w.Status(ctx, run.ID)
	if err != nil {
		return fmt.Errorf("optimize: status of run %s: %w", run.ID, err)
	}
	if status != "" && status != StatusQueued && status != string(protocol.EliteOptionsStatusRunning) {
		log.Debug().Str("status", status).Msg("run already ended")
		return nil
	}
	if w.MaxBudget > 0 && int(run.Budget) > w.MaxBudget {
		run.Budget = int32(w.MaxBudget)
		log.Info().Int("budget", w.MaxBudget).Msg("run budget lowered to ALICIA_OPTIMIZER_MAX_BUDGET")
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(ErrShutdown) })
	defer stop()
	w.mu.Lock()
	w.running[run.ID] = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, run.ID)
		w.mu.Unlock()
	}()
	log.Info().Int32("budget", run.Budget).Strs("components", run.Components).Msg("optimisation run started")
	start := time.Now()
	err = w.Runner.Run(rctx, run)
	switch {
	case errors.Is(err, ErrShutdown):
		log.Info().Msg("optimisation run handed back: the service stops")
		return err // ctx ended: given back
	case err != nil:
		// Reported as failed already; doing it again would fail again.
		log.Warn().Err(err).Dur("took", time.Since(start)).Msg("optimisation run failed")
		return nil
	}
	log.Info().Dur("took", time.Since(start)).Msg("optimisation run ended")
	return nil
}

// cancel stops run id if this replica does it.
func (w *Worker) cancel(id string) {
	w.mu.Lock()
	c := w.running[id]
	w.mu.Unlock()
	if c != nil {
		c(errCancelled)
	}
}

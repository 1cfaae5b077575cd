package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/llm/internal/demos"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
	"github.com/alicia-voice/alicia/services/llm/internal/optimize"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
	"github.com/alicia-voice/alicia/services/llm/internal/timers"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
	"github.com/alicia-voice/alicia/services/llm/internal/turn"
)

// Run starts the llm service and blocks until ctx is cancelled; running
// turns then get ShutdownGrace to finish before they are handed to another
// replica.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Reads only: persistence is the only writer.
	if err := pgread.WaitForSchema(ctx, cfg.PostgresURL, pgread.Schema, 0, log); err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	pool, err := pgread.Open(ctx, cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	defer pool.Close()
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "llm", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()
	convs, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return fmt.Errorf("llm: stream %s: %w", bus.StreamConversations, err)
	}
	qcfg := queue.Config{Partitions: cfg.Partitions, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver, MaxAge: 24 * time.Hour, Replicas: cfg.Streams.Replicas,
		PerUser: cfg.TurnsPerUser}
	turns, err := queue.Ensure(ctx, js, qcfg)
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	// The leases outlive a shutdown's grace: they are released as the
	// turns end, and lapse after AckWait when the replica dies.
	budgetCtx, stopBudget := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBudget()
	budget, err := queue.EnsureBudget(budgetCtx, js, cfg.TurnsPerUser, cfg.AckWait, cfg.Streams.Replicas, log)
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}

	if cfg.Streams.Replicas > 1 {
		// In a cluster: LLM_TURNS sources CONVERSATIONS again at once after
		// a leader change (queue.SourceWatch).
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		watch := &queue.SourceWatch{NC: nc, JS: js, Log: log}
		go func() {
			defer close(watched)
			if err := watch.Run(wctx); err != nil {
				log.Warn().Err(err).Msg("turn queue: source watch")
			}
		}()
		defer func() { stopWatch(); <-watched }()
	}

	m := metrics.Default()
	breaker := &model.Breaker{Threshold: cfg.BreakerFailures, Cooldown: cfg.BreakerCooldown, OnChange: func(s model.BreakerState) {
		m.Breaker.Set(float64(s))
		log.Warn().Stringer("state", s).Msg("model backend circuit breaker")
	}}
	mc := model.New(model.Config{BaseURL: cfg.LLMURL, APIKey: cfg.APIKey, Model: cfg.Model, Timeout: cfg.Timeout,
		Attempts: cfg.Attempts, Backoff: cfg.RetryBackoff, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature}, breaker)
	defer mc.Close()
	pctx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() { defer close(probed); probe(pctx, mc, cfg, log) }()
	defer func() { stopProbe(); <-probed }()

	// Timers: every replica knows the scheduled ones and one delivers
	// each when due (internal/timers).
	sched, err := timers.New(cfg.Timers, nc, js, pool, timerHooks(m), log)
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	if err := sched.Start(ctx, cfg.Streams.Replicas); err != nil {
		return fmt.Errorf("llm: %w", err)
	}
	defer sched.Close()
	toolbox := cfg.Toolbox
	if toolbox == nil {
		reg, err := tools.New(ctx, cfg.Tools, nc, js, pool, log)
		if err != nil {
			return fmt.Errorf("llm: tools: %w", err)
		}
		defer reg.Close()
		if err := reg.AddBuiltins(ctx, sched.Tools()...); err != nil {
			return fmt.Errorf("llm: tools: %w", err)
		}
		toolbox = reg
	}
	// The prompt versions: seeded, loaded, kept fresh (prompts.go).
	catalog, stopPrompts, err := startPrompts(ctx, cfg, bus.NewPublisher(js), promptver.NewReader(pool), toolbox, log)
	if err != nil {
		return err
	}
	defer stopPrompts()
	// The optimiser: its own consumer and worker; its model requests wait
	// for this replica's turns (gate).
	gate := optimize.NewGate()
	defer startOptimizer(ctx, cfg, nc, js, pool, catalog, toolbox, gate, log)()
	if cfg.Optimizer.Only {
		log.Info().Msg("llm running the optimiser only (ALICIA_OPTIMIZER=only): no turns taken")
		<-ctx.Done()
		return nil
	}
	engine := turn.New(turn.Deps{
		NC: nc, Conversations: convs, Publisher: bus.NewPublisher(js), Model: mc, Toolbox: toolbox,
		Messages: store.New(pool), Prompts: catalog, Demonstrations: demonstrations(cfg, pool), Metrics: m, Log: log,
		Zones: sched,
	}, turn.Settings{
		MaxToolIterations: cfg.MaxToolIterations,
		HistoryLimit:      cfg.HistoryLimit, HistoryTimeout: cfg.HistoryTimeout,
		MemoryTopK: cfg.MemoryTopK, MemoryThreshold: cfg.MemoryThreshold, MemoryTimeout: cfg.MemoryTimeout,
		DemonstrationsTimeout: cfg.DemonstrationsTimeout,
		PublishTimeout:        5 * time.Second, ToolResultMax: 16 << 10,
	})
	// The judge: its own consumer and worker, off the turn path.
	defer startJudge(ctx, cfg, nc, js, pool, m, log)()
	// Titles: after answers, on their own consumer, waiting for turns.
	defer startTitles(ctx, cfg, nc, js, pool, gate, func(outcome string) { m.Titles.WithLabelValues(outcome).Inc() }, log)()
	unsubscribe, err := engine.Listen(ctx)
	if err != nil {
		return err
	}
	defer unsubscribe()
	if cfg.MetricsAddr != "" {
		stop, err := telemetry.ServeMetrics(cfg.MetricsAddr, false, log, svcmain.Draining(ctx), telemetry.NATSConnected(nc),
			telemetry.HealthCheck{Name: "postgres", Check: pool.Ping},
			// One partition stands for all: each check is a request to JetStream.
			telemetry.ConsumerExists(queue.Stream, queue.ConsumerName(0), js.Consumer))
		if err != nil {
			return err
		}
		defer stop()
		unwatch, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: log,
			Consumers: map[string][]string{queue.Stream: queue.ConsumerNames(cfg.Partitions)}})
		if err != nil {
			return err
		}
		defer unwatch()
	}
	consumer := &queue.Consumer{
		Queue: turns, Handler: func(ctx context.Context, t queue.Turn) error {
			defer gate.Enter()()
			return engine.Handle(ctx, t)
		}, GiveUp: engine.GiveUp,
		AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver, Backoff: bus.DefaultBackoff, Grace: cfg.ShutdownGrace,
		Forced: svcmain.Forced(ctx), Budget: budget, Log: log,
		Hooks: queue.Hooks{
			Parked:  m.TurnsParked.Inc,
			Waiting: func(d int) { m.BudgetWaiting.Add(float64(d)) },
			Waited:  func(d time.Duration) { m.BudgetWait.Observe(d.Seconds()) },
		},
	}
	log.Info().Str("model", cfg.Model).Str("backend", cfg.LLMURL).Int("partitions", cfg.Partitions).Msg("llm running")
	return consumer.Run(ctx)
}

// timerHooks counts what the timers do (alicia_llm_timers_*).
func timerHooks(m *metrics.Metrics) timers.Hooks {
	return timers.Hooks{
		Set:       func(kind string) { m.TimersSet.WithLabelValues(kind).Inc() },
		Cancelled: func() { m.TimersCancelled.Inc() },
		Failed:    func() { m.TimersFailed.Inc() },
		Scheduled: func(n int) { m.TimersScheduled.Set(float64(n)) },
		Delivered: func(as string, late time.Duration) {
			m.TimersDelivered.WithLabelValues(as).Inc()
			m.TimerLateness.Observe(late.Seconds())
		},
	}
}

// demonstrations is the turns' selector of demonstrations (nil when
// ALICIA_LLM_DEMONSTRATIONS is 0).
func demonstrations(cfg Config, pool demos.Querier) turn.Demonstrations {
	if cfg.Demonstrations <= 0 {
		return nil
	}
	s := demos.New(pool, cfg.Demonstrations)
	s.MinScore = cfg.DemonstrationsMinScore
	return s
}

// probe says at start whether the model backend answers, so a wrong URL is
// visible at once rather than at the first turn.
func probe(ctx context.Context, mc *model.Client, cfg Config, log zerolog.Logger) {
	if err := mc.Reachable(ctx); err != nil && ctx.Err() == nil {
		log.Warn().Err(err).Str("backend", cfg.LLMURL).Msg("model backend unreachable; turns fail with ErrorMessage 503 until it answers")
		return
	}
	log.Info().Str("backend", cfg.LLMURL).Msg("model backend reachable")
}

// RegisterMetrics registers the service's metrics on the default registry
// (Run registers them too). deploy/METRICS.md, the table of every
// service's metrics, is made from what it registers.
func RegisterMetrics() { metrics.Default() }

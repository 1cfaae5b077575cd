package asr

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/asr/internal/metrics"
	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
	"github.com/alicia-voice/alicia/services/asr/internal/worker"
)

// Run starts one asr replica and blocks until ctx is cancelled; jobs still
// running then are handed back to the queue at once for another replica.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "asr", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()
	jobs, err := js.Stream(ctx, bus.StreamASRJobs)
	if err != nil {
		return fmt.Errorf("asr: stream %s: %w", bus.StreamASRJobs, err)
	}
	convs, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return fmt.Errorf("asr: stream %s: %w", bus.StreamConversations, err)
	}
	wc := whisper.New(whisper.Config{BaseURL: cfg.BaseURL(), APIKey: cfg.APIKey, Model: cfg.Model,
		Timeout: cfg.Timeout, Attempts: cfg.Attempts, Backoff: cfg.RetryBackoff})
	defer wc.Close()
	cache, closePrefs, err := followPrefs(ctx, cfg, nc, log)
	if err != nil {
		return fmt.Errorf("asr: %w", err)
	}
	defer closePrefs()
	w, err := worker.Ensure(ctx, worker.Deps{
		JS: js, Jobs: jobs, Conversations: convs, Publisher: bus.NewPublisher(js), DeadLetters: bus.NewDeadLetters(js),
		ASR: wc, Prefs: cache, Metrics: metrics.Default(), Log: log,
	}, worker.Settings{
		Consumer: cfg.Consumer, Concurrency: cfg.Concurrency, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver,
		MinConfidence: cfg.MinConfidence, Language: cfg.Language, Attempts: cfg.Attempts, PublishTimeout: 5 * time.Second,
		PullWait: cfg.PullWait,
	})
	if err != nil {
		return fmt.Errorf("asr: consumer %s: %w", cfg.Consumer, err)
	}
	if cfg.MetricsAddr != "" {
		stop, err := telemetry.ServeMetrics(cfg.MetricsAddr, false, log, svcmain.Draining(ctx),
			telemetry.NATSConnected(nc), telemetry.ConsumerExists(bus.StreamASRJobs, cfg.Consumer, js.Consumer))
		if err != nil {
			return err
		}
		defer stop()
		// The job queue's depth: what the autoscaler of asr workers reads.
		unwatch, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: log,
			Consumers: map[string][]string{bus.StreamASRJobs: {cfg.Consumer}}})
		if err != nil {
			return err
		}
		defer unwatch()
	}
	pctx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() { defer close(probed); probe(pctx, wc, cfg, log) }()
	defer func() { stopProbe(); <-probed }()

	log.Info().Str("model", cfg.Model).Str("backend", cfg.BaseURL()).Int("concurrency", cfg.Concurrency).Msg("asr running")
	err = w.Run(ctx, svcmain.WorkContext(ctx))
	// The naks of jobs given back are on their way out: send them before closing.
	_ = nc.FlushTimeout(2 * time.Second)
	return err
}

// followPrefs is the cache of the conversations' languages: read from
// Postgres when ALICIA_POSTGRES_URL is set, heard live on the bus either
// way (a Configuration or UserSettings applies from the next utterance).
func followPrefs(ctx context.Context, cfg Config, nc *nats.Conn, log zerolog.Logger) (*prefs.Cache, func(), error) {
	d := prefs.Defaults{Language: cfg.Language}
	var cache *prefs.Cache
	closePool := func() {}
	if cfg.PostgresURL == "" {
		log.Warn().Msg("no ALICIA_POSTGRES_URL: conversations are transcribed in the installation's language unless a change is heard live")
		cache = prefs.NewCache(nil, d)
	} else {
		pool, err := pgread.Open(ctx, cfg.PostgresURL)
		if err != nil {
			return nil, nil, err
		}
		cache, closePool = prefs.NewCache(pool, d), pool.Close
	}
	rt := bus.NewRoutes("asr", log)
	cache.Route(rt)
	subs, err := rt.Subscribe(ctx, nc)
	if err != nil {
		closePool()
		return nil, nil, err
	}
	return cache, func() { subs.Close(); closePool() }, nil
}

// probe says at start whether the backend answers, so a wrong URL is
// visible at once rather than at the first utterance.
func probe(ctx context.Context, wc *whisper.Client, cfg Config, log zerolog.Logger) {
	if err := wc.Reachable(ctx); err != nil && ctx.Err() == nil {
		log.Warn().Err(err).Str("backend", cfg.BaseURL()).Msg("transcription backend unreachable; final transcripts fail with ErrorMessage 503 until it answers")
		return
	}
	if ctx.Err() == nil {
		log.Info().Str("backend", cfg.BaseURL()).Msg("transcription backend reachable")
	}
}

// RegisterMetrics registers the service's metrics on the default registry
// (Run registers them too). deploy/METRICS.md, the table of every
// service's metrics, is made from what it registers.
func RegisterMetrics() { metrics.Default() }

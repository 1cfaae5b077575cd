package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/memory/internal/app"
	"github.com/alicia-voice/alicia/services/memory/internal/metrics"
	"github.com/alicia-voice/alicia/services/memory/internal/models"
	"github.com/alicia-voice/alicia/services/memory/internal/ports"
	"github.com/alicia-voice/alicia/services/memory/internal/prefetch"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// Run serves memory.search and memory.action and consumes client
// MemoryActions and final answers until ctx is cancelled. Then it drains:
// /healthz reports draining, the service takes no new request and the
// consumers pull no more (what a last pull brought is handed back), and the
// requests and messages in flight finish until the stop is forced
// (svcmain.WorkContext), when they are cancelled and handed back.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The pgvector types are registered on every connection: wait for the
	// migrations that create them instead of failing at the first one.
	if err := pgread.WaitForSchema(ctx, cfg.PostgresURL, pgread.Schema, 0, log); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	pool, err := store.Open(ctx, cfg.PostgresURL, 0)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("memory: postgres unreachable: %w", err)
	}
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "memory", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()

	st := store.New(pool, cfg.EfSearch)
	a := &app.App{
		Settings: app.Settings{TopK: cfg.TopK, MaxTopK: cfg.MaxTopK, Threshold: cfg.Threshold, DuplicateThreshold: cfg.DuplicateThreshold,
			RatingWeight: cfg.RatingWeight},
		Memories:  st,
		Publisher: bus.NewPublisher(js),
		Applied: func(ctx context.Context, stream string, seq uint64) error {
			return rpc.WaitApplied(ctx, nc, stream, seq)
		},
		Log: log,
	}
	// Interfaces stay nil (not typed nils) when a backend is not configured.
	if cfg.searchEnabled() {
		emb := models.NewEmbedder(cfg.EmbeddingURL, cfg.EmbeddingAPIKey, cfg.EmbeddingModel, Dimensions, cfg.EmbeddingTimeout)
		defer emb.Close()
		a.Embedder = emb
	}
	if cfg.extractionEnabled() {
		ext := models.NewExtractor(cfg.LLMURL, cfg.LLMAPIKey, cfg.LLMModel, cfg.LLMTimeout)
		defer ext.Close()
		a.Extractor = ext
		// The extraction prompt is a versioned component (app/prompt.go).
		a.Prompts = st
		if err := a.SeedExtractionPrompt(ctx); err != nil {
			log.Warn().Err(err).Msg("memory_extraction seed version not published; the built-in prompt serves")
		}
	}
	metrics.Default()
	if cfg.prefetchEnabled() {
		// Every replica hears every memory write, before the cache is used.
		writes := ports.NewWrites(nc)
		cache := prefetch.New(prefetch.Options{TTL: cfg.PrefetchTTL, Settle: cfg.PrefetchSettle, MaxEntries: cfg.PrefetchEntries}, writes)
		if err := writes.Start(cache.Written, log); err != nil {
			return fmt.Errorf("memory: prefetch: %w", err)
		}
		defer writes.Stop()
		a.Prefetches = cache
	}

	// Consumers exist before the service answers, so nothing sent once it
	// does is missed (they deliver from their creation on).
	runners := []ports.Runner{}
	r, err := ports.ClientActionsConsumer(ctx, js, cfg.ActionConsumer, a, log)
	if err != nil {
		return err
	}
	runners = append(runners, r)
	if a.Extractor != nil {
		r, err := ports.ExtractionConsumer(ctx, js, cfg.ExtractionConsumer, a, log)
		if err != nil {
			return err
		}
		runners = append(runners, r)
	}
	// The drain (svcmain.Serve): when ctx ends nothing new is taken, what
	// is in flight finishes on work until the stop is forced.
	work := svcmain.WorkContext(ctx)
	stopService, search, err := ports.AddService(work, nc, a, log)
	if err != nil {
		return fmt.Errorf("memory: service: %w", err)
	}
	defer stopService()
	// The search of each published user message, for memory.search to answer from.
	stopPrefetch := func() {}
	if a.Prefetches != nil {
		if stopPrefetch, err = ports.PrefetchUserMessages(work, nc, a, search, a.Prefetches.TTL(), log); err != nil {
			return fmt.Errorf("memory: prefetch: %w", err)
		}
		defer stopPrefetch()
	}
	stopHealth, err := serveHealth(ctx, cfg, nc, js, pool.Ping, a.Extractor != nil, log)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	defer stopHealth()
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range runners {
		g.Go(func() error { return r(gctx, work) })
	}
	g.Go(func() error {
		<-gctx.Done()
		stopPrefetch() // no new searches for messages
		stopService()  // no new requests; those in flight are answered
		return nil
	})
	if a.Prefetches != nil {
		g.Go(func() error {
			t := time.NewTicker(a.Prefetches.TTL())
			defer t.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-t.C:
					a.Prefetches.Sweep()
				}
			}
		})
	}
	ev := log.Info().Bool("search", a.Embedder != nil).Bool("extraction", a.Extractor != nil).Bool("prefetch", a.Prefetches != nil).
		Int("top_k", cfg.TopK).Float64("threshold", cfg.Threshold)
	if a.Embedder != nil {
		ev = ev.Str("embedding_model", cfg.EmbeddingModel)
	}
	ev.Msg("memory running")
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// RegisterMetrics registers the service's metrics on the default registry
// (the metrics table of deploy/METRICS.md is made from them).
func RegisterMetrics() { metrics.Default() }

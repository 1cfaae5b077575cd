package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
	"github.com/alicia-voice/alicia/services/persistence/internal/store"
)

// Run starts the persistence service and blocks until ctx is cancelled, then
// drains: it commits and acks the batches being applied.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// With Migrate this service brings the schema; otherwise (a migration
	// job runs first) it waits for it, as the reading services do.
	need := pgread.Schema
	if cfg.Migrate {
		need = pgread.Reachable
	}
	if err := pgread.WaitForSchema(ctx, cfg.PostgresURL, need, 0, log); err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	pool, err := pgxpool.New(ctx, cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("persistence: postgres: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("persistence: postgres unreachable: %w", err)
	}
	if cfg.Migrate {
		db := stdlib.OpenDBFromPool(pool)
		err := migrations.Up(ctx, db)
		_ = db.Close()
		if err != nil {
			return fmt.Errorf("persistence: migrate: %w", err)
		}
	}
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "persistence", cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()
	st := store.New(pool)
	dlq := bus.NewDeadLetters(js)

	watermarks := map[string]*consume.Watermark{}
	var loops []*consume.Loop
	for _, s := range []struct {
		stream, filter string
		shards         int
	}{
		{bus.StreamConversations, subjects.AllConversations, cfg.Shards},
		{bus.StreamSystem, subjects.AllSystem, 1},
	} {
		loop, err := newLoop(ctx, js, st, dlq, cfg, s.stream, s.filter, s.shards, log)
		if err != nil {
			return err
		}
		watermarks[s.stream] = loop.Watermark
		loops = append(loops, loop)
	}
	g, gctx := errgroup.WithContext(ctx)
	stopService, err := startService(gctx, nc, st, watermarks, cfg.HistoryWait)
	if err != nil {
		return fmt.Errorf("persistence: micro service: %w", err)
	}
	defer stopService()
	stopHealth, err := serveHealth(ctx, cfg, nc, js, pool.Ping, log)
	if err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	defer stopHealth()
	// On a stop signal the loops stop fetching and commit the batch they
	// hold; history.get keeps answering until they have.
	work := svcmain.WorkContext(ctx)
	for _, loop := range loops {
		g.Go(func() error { return loop.Run(gctx, work) })
	}
	log.Info().Str("consumer", cfg.Consumer).Msg("persistence running")
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// newLoop (re)creates the durable consumer so that it delivers, in stream
// order, exactly what follows the offset stored in Postgres with the rows.
// The database, written in the same transaction as the rows, is the source
// of truth for the position: JetStream's own ack state of a process that died
// could otherwise redeliver its unacked messages after newer ones, and an
// AckAll of the newer ones would acknowledge them unapplied. Hence one active
// persistence instance at a time.
func newLoop(ctx context.Context, js jetstream.JetStream, st *store.Store, dlq *bus.DeadLetters, cfg Config, stream, filter string, shards int, log zerolog.Logger) (*consume.Loop, error) {
	claim, err := claimStream(ctx, js, st, stream, cfg.Consumer, log)
	if err != nil {
		return nil, err
	}
	parts := shardOffsets(cfg.Consumer, shards, claim.Offsets)
	resume := parts[0].Offset
	for _, p := range parts {
		resume = min(resume, p.Offset)
	}
	if err := js.DeleteConsumer(ctx, stream, cfg.Consumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("persistence: reset consumer on %s: %w", stream, err)
	}
	cc := jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "persistence: every envelope to PostgreSQL",
		FilterSubject: filter,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       time.Minute,
		MaxAckPending: 4 * cfg.BatchSize,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// The position lives in Postgres, so the consumer's own state need
		// not be fsynced: on a file-backed consumer with fsync on every write,
		// each delivery's state write made the stream's deliveries lag by
		// seconds under load.
		MemoryStorage: true,
	}
	if resume > 0 {
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, resume+1
	}
	cons, err := js.CreateConsumer(ctx, stream, cc)
	if err != nil {
		return nil, fmt.Errorf("persistence: consumer on %s: %w", stream, err)
	}
	log.Info().Str("stream", stream).Uint64("resume_after", resume).Int("shards", shards).Msg("consumer ready")
	return &consume.Loop{
		Stream: stream, Consumer: cfg.Consumer, Cons: cons, Applier: st, DLQ: dlq,
		Watermark: consume.NewWatermark(resume), Log: log.With().Str("stream", stream).Logger(),
		BatchSize: cfg.BatchSize, Linger: cfg.Linger, Shards: parts, OnApplied: cfg.OnApplied,
	}, nil
}

// claimStream binds the stored offsets to the stream JetStream has now. When
// they were read from another stream of that name (a new store, a new NATS
// cluster: its sequences start at 1 again), skipping to them would drop
// every envelope up to the old offset unapplied; the stream is applied from
// its start instead (writes are idempotent) and the reset is logged and
// counted.
func claimStream(ctx context.Context, js jetstream.JetStream, st *store.Store, stream, consumer string, log zerolog.Logger) (store.Claim, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return store.Claim{}, fmt.Errorf("persistence: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return store.Claim{}, fmt.Errorf("persistence: stream %s: %w", stream, err)
	}
	claim, err := st.ClaimOffsets(ctx, store.Stream{Name: stream, Created: info.Created.UTC().Format(time.RFC3339Nano), LastSeq: info.State.LastSeq}, consumer)
	if err != nil {
		return store.Claim{}, err
	}
	m := defaultMetrics()
	m.StreamEpoch.WithLabelValues(stream).Set(float64(claim.Epoch))
	if claim.Reset {
		m.StreamResets.WithLabelValues(stream).Inc()
		ev := log.Error().Str("stream", stream).Str("stream_created", claim.Stream.Created).Uint64("stream_last_seq", info.State.LastSeq).
			Int("epoch", claim.Epoch)
		if claim.Previous != "" {
			ev = ev.Str("offsets_stream_created", claim.Previous)
		}
		for name, off := range claim.Stale {
			ev = ev.Uint64("discarded_offset."+name, off)
		}
		ev.Msg("the stored offsets belong to another stream of this name (new JetStream store or cluster?): applying this stream from its first message")
	}
	if first := info.State.FirstSeq; first > 1 {
		for name, off := range claim.Offsets {
			if off+1 < first {
				log.Warn().Str("stream", stream).Str("shard", name).Uint64("offset", off).Uint64("first_seq", first).
					Msg("messages after the stored offset are no longer in the stream (expired before they were applied)")
			}
		}
	}
	return claim, nil
}

// shardOffsets names the shards (the consumer itself when there is one,
// consumer/k otherwise) and gives each its stored offset. A shard without one
// (the shard count grew) starts from the lowest stored offset: everything
// below it was applied whichever shard owned it then.
func shardOffsets(consumer string, n int, stored map[string]uint64) []consume.Shard {
	var floor uint64
	first := true
	for _, off := range stored {
		if first || off < floor {
			floor, first = off, false
		}
	}
	parts := make([]consume.Shard, n)
	for k := range parts {
		name := consumer
		if n > 1 {
			name = fmt.Sprintf("%s/%d", consumer, k)
		}
		off, ok := stored[name]
		if !ok {
			off = floor
		}
		parts[k] = consume.Shard{Name: name, Offset: off}
	}
	return parts
}

package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
	"github.com/alicia-voice/alicia/services/persistence/internal/lease"
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
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "persistence", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()
	st := store.New(pool)
	dlq := bus.NewDeadLetters(js)
	// Every stream's partitions, leased to the instances alive: one
	// consumer per instance reads what follows the lowest offset of the
	// partitions it holds, and applies those.
	var units []store.Unit
	runners := map[string]*runner{}
	progress := map[string]*consume.Progress{}
	for _, s := range []struct {
		stream, filter string
		shards         int
	}{
		{bus.StreamConversations, subjects.AllConversations, cfg.Shards},
		{bus.StreamSystem, subjects.AllSystem, 1},
	} {
		claim, err := claimStream(ctx, js, st, s.stream, cfg.Consumer, log)
		if err != nil {
			return err
		}
		parts := shardOffsets(cfg.Consumer, s.shards, claim.Offsets)
		offsets := make(map[string]uint64, len(parts))
		names := make([]string, len(parts))
		for i, p := range parts {
			offsets[p.Name], names[i] = p.Offset, p.Name
			units = append(units, store.Unit{Stream: s.stream, Name: p.Name})
		}
		if err := st.EnsurePartitions(ctx, s.stream, offsets); err != nil {
			return err
		}
		// Where the database is, not the floor a new partition starts at.
		stored, err := st.PartitionOffsets(ctx, s.stream, cfg.Consumer)
		if err != nil {
			return err
		}
		p := consume.NewProgress(names, stored)
		p.Refresh = func(ctx context.Context) (map[string]uint64, error) {
			return st.PartitionOffsets(ctx, s.stream, cfg.Consumer)
		}
		progress[s.stream] = p
		runners[s.stream] = &runner{stream: s.stream, filter: s.filter, names: names, cfg: cfg, js: js, st: st, dlq: dlq, progress: p,
			log: log.With().Str("stream", s.stream).Logger()}
	}
	m := defaultMetrics()
	coord := &lease.Coordinator{ID: cfg.Instance, Consumer: cfg.Consumer, Units: units, Partitions: cfg.Shards, TTL: cfg.LeaseTTL, Store: st,
		Log: log.With().Str("instance", cfg.Instance).Logger(),
		OnTick: func(live, held int) {
			m.Instances.Set(float64(live))
			m.PartitionsHeld.Set(float64(held))
		}}
	// What the others apply arrives as their announcements (and, should
	// one be lost, from the database while a reader waits).
	announce, err := progressAnnouncements(nc, progress, cfg.Instance, log)
	if err != nil {
		return err
	}
	defer announce.stop()
	for _, r := range runners {
		r.coord, r.announce = coord, announce.publish
	}
	interval := cfg.BacklogInterval
	if interval <= 0 {
		interval = backlog.DefaultInterval
	}
	reporter, err := newBacklogReporter(ctx, js, cfg.Streams.Replicas, progress, interval, log)
	if err != nil {
		return err
	}
	if err := coord.Tick(ctx); err != nil {
		return fmt.Errorf("persistence: leases: %w", err)
	}

	g, gctx := errgroup.WithContext(ctx)
	stopService, err := startService(gctx, nc, st, progress, cfg.HistoryWait)
	if err != nil {
		return fmt.Errorf("persistence: micro service: %w", err)
	}
	defer stopService()
	stopHealth, err := serveHealth(ctx, cfg, nc, js, pool.Ping, coord.Healthy, log)
	if err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	defer stopHealth()
	// The leases are renewed until the loops have committed what they
	// hold, then given back: the others take them at once.
	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	leasesDone := make(chan error, 1)
	go func() { leasesDone <- coord.Run(leaseCtx) }()
	defer func() {
		stopLeases()
		if err := <-leasesDone; err != nil {
			log.Warn().Err(err).Msg("lease renewal ended with an error")
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := coord.Leave(lctx); err != nil {
			log.Warn().Err(err).Msg("could not give the partitions back; they move once their leases expire")
		}
	}()
	// On a stop signal the loops stop fetching and commit the batch they
	// hold; history.get keeps answering until they have.
	work := svcmain.WorkContext(ctx)
	for _, r := range runners {
		g.Go(func() error { return r.run(gctx, work) })
	}
	g.Go(func() error { return reporter.run(gctx) })
	if cfg.SweepAfter > 0 {
		sw := newSweeper(pool, js, cfg.SweepAfter, log)
		g.Go(func() error { return sw.run(gctx, cfg.SweepEvery) })
	}
	log.Info().Str("consumer", cfg.Consumer).Str("instance", cfg.Instance).Int("partitions", len(units)).Msg("persistence running")
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// runner applies one stream's partitions held by this instance: it reads
// the stream from the lowest offset among them with the instance's own
// consumer and starts again whenever what it holds changes.
type runner struct {
	stream, filter string
	names          []string // every partition of the stream, in order
	cfg            Config
	js             jetstream.JetStream
	st             *store.Store
	dlq            *bus.DeadLetters
	progress       *consume.Progress
	coord          *lease.Coordinator
	announce       func(stream string, offsets map[string]uint64)
	log            zerolog.Logger
}

// consumerName is the instance's consumer: instances do not share one (the
// stream's position lives in the database, per partition).
func (r *runner) consumerName() string { return r.cfg.InstanceConsumer() }

func (r *runner) run(ctx, work context.Context) error {
	defer r.dropConsumer()
	for {
		held, changed := r.coord.Held(r.stream)
		if len(held) == 0 {
			r.dropConsumer()
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		loop, err := r.start(ctx, held)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-lctx.Done():
			}
		}()
		err = loop.Run(lctx, work)
		cancel()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// start makes the loop of the partitions held: each from the offset
// stored with its rows; the consumer (re)created to deliver, in stream
// order, what follows the lowest of them. The database, written in the same
// transaction as the rows, is the source of truth for the position:
// JetStream's own ack state of a process that died could otherwise
// redeliver its unacked messages after newer ones, and an AckAll of the
// newer ones would acknowledge them unapplied.
func (r *runner) start(ctx context.Context, held []store.Lease) (*consume.Loop, error) {
	stored, err := r.st.PartitionOffsets(ctx, r.stream, r.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	r.progress.Advance(stored)
	shards := make([]consume.Shard, len(r.names))
	for k, name := range r.names {
		shards[k] = consume.Shard{Name: name, Offset: stored[name]}
	}
	resume := uint64(0)
	for i, l := range held {
		k := slices.Index(r.names, l.Name)
		if k < 0 {
			continue
		}
		shards[k].Held, shards[k].Owner, shards[k].Fence = true, r.cfg.Instance, l.Fence
		if i == 0 || shards[k].Offset < resume {
			resume = shards[k].Offset
		}
	}
	name := r.consumerName()
	if err := r.js.DeleteConsumer(ctx, r.stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("persistence: reset consumer on %s: %w", r.stream, err)
	}
	cc := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "persistence instance " + r.cfg.Instance + ": the envelopes of its partitions to PostgreSQL",
		FilterSubject: r.filter,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       time.Minute,
		MaxAckPending: 4 * r.cfg.BatchSize,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// The position lives in Postgres, so the consumer's own state need
		// not be fsynced: on a file-backed consumer with fsync on every write,
		// each delivery's state write made the stream's deliveries lag by
		// seconds under load. An instance that dies leaves it behind; the
		// server removes it once no one has pulled for a while.
		MemoryStorage:     true,
		InactiveThreshold: 5 * time.Minute,
	}
	if resume > 0 {
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, resume+1
	}
	cons, err := r.js.CreateConsumer(ctx, r.stream, cc)
	if err != nil {
		return nil, fmt.Errorf("persistence: consumer on %s: %w", r.stream, err)
	}
	r.log.Info().Uint64("resume_after", resume).Int("partitions", len(held)).Int("of", len(r.names)).Msg("consumer ready")
	return &consume.Loop{
		Stream: r.stream, Consumer: r.cfg.Consumer, Cons: cons, Applier: r.st, DLQ: r.dlq,
		Progress: r.progress, Log: r.log, BatchSize: r.cfg.BatchSize, Linger: r.cfg.Linger, Shards: shards,
		OnApplied: r.cfg.OnApplied, OnPartitions: r.announce,
	}, nil
}

// dropConsumer deletes the instance's consumer when it holds nothing of
// the stream (or stops).
func (r *runner) dropConsumer() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.js.DeleteConsumer(ctx, r.stream, r.consumerName()); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.log.Debug().Err(err).Msg("could not delete the instance's consumer; the server removes it once idle")
	}
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

// shardOffsets names the partitions of a stream split n ways (the
// consumer itself when there is one, consumer/k-of-n otherwise: each way of
// splitting conversations has its own rows, since an offset only speaks for
// the conversations of its own partition) and gives each its offset: the
// stored one, raised to the floor every stored scheme vouches for.
func shardOffsets(consumer string, n int, stored map[string]uint64) []consume.Shard {
	floor := appliedFloor(consumer, stored)
	parts := make([]consume.Shard, n)
	for k := range parts {
		name := partitionName(consumer, k, n)
		parts[k] = consume.Shard{Name: name, Offset: max(stored[name], floor)}
	}
	return parts
}

// partitionName is the name of partition k of n in the offsets table.
func partitionName(consumer string, k, n int) string {
	if n == 1 {
		return consumer
	}
	return fmt.Sprintf("%s/%d-of-%d", consumer, k, n)
}

// appliedFloor is the highest sequence up to which every envelope is known
// to be applied: each complete set of partitions of one scheme (the
// consumer's own row; consumer/k-of-n for k < n; the consumer/k rows of
// releases before schemes were named, taken as complete) vouches for its
// lowest offset, and the best of them counts. A scheme's rows that were
// left behind by a change of n vouch for less and do not hold the others
// back.
func appliedFloor(consumer string, stored map[string]uint64) uint64 {
	type scheme struct {
		low  uint64
		rows int
		want int // rows a complete scheme has; 0: unknown (the old consumer/k rows)
	}
	schemes := map[string]*scheme{}
	for name, off := range stored {
		key, want := "", 1
		if name != consumer {
			rest, ok := strings.CutPrefix(name, consumer+"/")
			if !ok {
				continue
			}
			key, want = "legacy", 0
			if _, of, ok := strings.Cut(rest, "-of-"); ok {
				n, err := strconv.Atoi(of)
				if err != nil || n < 2 {
					continue
				}
				key, want = of, n
			}
		}
		sc := schemes[key]
		if sc == nil {
			sc = &scheme{low: off, want: want}
			schemes[key] = sc
		}
		sc.low, sc.rows = min(sc.low, off), sc.rows+1
	}
	var floor uint64
	for _, sc := range schemes {
		if sc.want == 0 || sc.rows == sc.want {
			floor = max(floor, sc.low)
		}
	}
	return floor
}

package consume

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Item is one decoded envelope with where it came from.
type Item struct {
	Env      protocol.Envelope
	Delivery bus.Delivery
	Data     []byte
}

// Applier writes a batch of items of one partition atomically together
// with the partition's stream offset upTo (the highest sequence in the
// batch, valid or not). With a lease (part.Owner set) it fails with
// ErrLeaseLost, writing nothing, when the partition is no longer held by
// part.Owner under part.Fence.
type Applier interface {
	Apply(ctx context.Context, stream string, part Shard, items []Item, upTo uint64) error
}

// ErrLeaseLost: the partition was taken by another instance (or released)
// since this one took it; the batch was not applied and the partition is
// left to its new owner.
var ErrLeaseLost = errors.New("partition lease lost")

// ErrData marks an apply error caused by the data of one of the items (a
// constraint violation, say), as opposed to the database being unreachable.
var ErrData = errors.New("data error")

// ErrMissingRef is an ErrData for a row that refers to one not written yet.
// Envelopes of different streams (SYSTEM memory upserts, CONVERSATIONS
// memory traces) are not ordered with each other, so such a batch is retried
// a few times before the culprit is isolated and dead-lettered.
var ErrMissingRef = fmt.Errorf("%w: missing reference", ErrData)

// missingRefRetries is how often a batch with a missing reference is retried.
const missingRefRetries = 5

// Loop consumes one durable consumer in ordered batches.
type Loop struct {
	Stream, Consumer string
	Cons             jetstream.Consumer
	Applier          Applier
	DLQ              *bus.DeadLetters
	Log              zerolog.Logger
	BatchSize        int
	Linger           time.Duration
	// Shards are the stream's partitions (all of them, in order: an
	// envelope's partition is ShardOf its subject), each with the offset
	// already applied (stored with the rows). The loop applies those it
	// holds (Held), each in its own transaction, in parallel; a
	// conversation always goes to the same partition, so its envelopes stay
	// in order; an envelope at or below its partition's offset, or of a
	// partition not held, is only acked.
	Shards []Shard
	// Progress, when set, learns each partition's offset as it is applied.
	Progress *Progress
	// OnApplied, when set, is called after each committed batch.
	OnApplied func(stream string, upTo uint64)
	// OnPartitions, when set, is called after each committed batch with the
	// offsets of the partitions it applied (other instances learn them).
	OnPartitions func(stream string, offsets map[string]uint64)
}

// Run consumes until ctx is cancelled: it then stops fetching at once and
// applies, commits and acks the batch it holds on work, which outlives ctx
// while the service drains (svcmain.WorkContext). What was fetched but not
// yet in a batch stays unacked: the next instance resumes from the offset
// stored with the rows and gets it again.
func (l *Loop) Run(ctx, work context.Context) error {
	ch := make(chan jetstream.Msg, l.BatchSize)
	cc, err := l.Cons.Consume(func(m jetstream.Msg) {
		select {
		case ch <- m:
		case <-ctx.Done():
		}
	}, bus.FollowOpts(jetstream.PullMaxMessages(2*l.BatchSize))...)
	if err != nil {
		return fmt.Errorf("persistence: consume %s: %w", l.Stream, err)
	}
	defer cc.Stop()
	stopFetching := context.AfterFunc(ctx, cc.Stop)
	defer stopFetching()
	batch := make([]jetstream.Msg, 0, l.BatchSize)
	for {
		// Checked first: a select with a message ready too would pick at random.
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			batch = append(batch[:0], m)
		}
		batch = l.fill(ctx, ch, batch)
		if err := l.process(work, batch); err != nil {
			if work.Err() != nil {
				// Forced stop: the transaction was rolled back, the batch is
				// unacked and applied again from the stored offset.
				return nil
			}
			return err
		}
	}
}

// fill adds whatever arrives within Linger, up to BatchSize, until ctx ends.
func (l *Loop) fill(ctx context.Context, ch <-chan jetstream.Msg, batch []jetstream.Msg) []jetstream.Msg {
	for len(batch) < l.BatchSize && ctx.Err() == nil {
		select {
		case m := <-ch:
			batch = append(batch, m)
			continue
		default:
		}
		if l.Linger <= 0 {
			return batch
		}
		t := time.NewTimer(l.Linger)
		select {
		case m := <-ch:
			t.Stop()
			batch = append(batch, m)
		case <-t.C:
			return batch
		case <-ctx.Done():
			t.Stop()
			return batch
		}
	}
	return batch
}

// process decodes, dead-letters what is invalid, applies the rest in one
// transaction per held partition (retrying while the database is away),
// then acks.
func (l *Loop) process(ctx context.Context, msgs []jetstream.Msg) error {
	parts := make([][]Item, len(l.Shards))
	var upTo uint64
	for _, m := range msgs {
		d := bus.DeliveryOf(m)
		upTo = max(upTo, d.Sequence)
		k := ShardOf(d.Subject, len(l.Shards))
		if !l.Shards[k].Held || d.Sequence != 0 && d.Sequence <= l.Shards[k].Offset {
			continue
		}
		env, err := protocol.Decode(m.Data())
		if err != nil {
			if err := l.deadLetter(ctx, m.Data(), d, err); err != nil {
				return err
			}
			continue
		}
		parts[k] = append(parts[k], Item{Env: env, Delivery: d, Data: m.Data()})
	}
	t0 := time.Now()
	errs := make([]error, len(parts))
	applied := make([]bool, len(parts))
	var wg sync.WaitGroup
	for k := range parts {
		if !l.Shards[k].Held || upTo <= l.Shards[k].Offset {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = l.apply(ctx, l.Shards[k], parts[k], upTo)
			switch {
			case errs[k] == nil:
				l.Shards[k].Offset, applied[k] = upTo, true
			case errors.Is(errs[k], ErrLeaseLost):
				// Another instance has the partition now and applies it
				// from the offset stored with its rows: this one lets go.
				l.Log.Info().Str("partition", l.Shards[k].Name).Err(errs[k]).Msg("partition lost to another instance")
				l.Shards[k].Held, errs[k] = false, nil
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.Log.Debug().Int("envelopes", len(msgs)).Uint64("up_to", upTo).Dur("took", time.Since(t0)).
		Dur("oldest_waited", t0.Sub(bus.DeliveryOf(msgs[0]).Time)).Msg("batch applied")
	if telemetry.TracingEnabled() {
		traceApplied(ctx, l.Stream, parts, t0, len(msgs))
	}
	// AckAll policy: acking the last message acknowledges the whole batch
	// (one whose ack fails is redelivered and skipped by offset).
	l.settler().Settle(ctx, msgs[len(msgs)-1], bus.Ack())
	var offsets map[string]uint64
	for k, ok := range applied {
		if !ok {
			continue
		}
		if offsets == nil {
			offsets = make(map[string]uint64, len(applied))
		}
		offsets[l.Shards[k].Name] = upTo
	}
	if l.Progress != nil {
		l.Progress.Advance(offsets)
	}
	if l.OnPartitions != nil && offsets != nil {
		l.OnPartitions(l.Stream, offsets)
	}
	if l.OnApplied != nil {
		l.OnApplied(l.Stream, upTo)
	}
	return nil
}

// Shard is a partition of a stream: its name in the offsets table, the
// last sequence applied of it, and whether this loop applies it (Held),
// under which lease (Owner and Fence; no Owner: unfenced).
type Shard struct {
	Name   string
	Offset uint64
	Held   bool
	Owner  string
	Fence  int64
}

// ShardOf maps a subject to one of n shards by its conversation id (the
// token after alicia.conv.); other subjects go to shard 0.
func ShardOf(subject string, n int) int {
	if n <= 1 {
		return 0
	}
	p, err := subjects.Parse(subject)
	if err != nil {
		return 0
	}
	return ShardOfConversation(p.ConversationID, n)
}

// ShardOfConversation is the shard of n that conversation cid's envelopes go to.
func ShardOfConversation(cid string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(cid))
	return int(h.Sum32() % uint32(n))
}

func (l *Loop) apply(ctx context.Context, part Shard, items []Item, upTo uint64) error {
	for attempt := uint64(1); ; attempt++ {
		err := l.Applier.Apply(ctx, l.Stream, part, items, upTo)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrLeaseLost):
			return err
		case errors.Is(err, ErrMissingRef) && attempt < missingRefRetries:
		case errors.Is(err, ErrData):
			return l.isolate(ctx, part, items, upTo)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		delay := bus.DefaultBackoff(attempt)
		l.Log.Error().Err(err).Str("shard", part.Name).Int("envelopes", len(items)).Dur("retry_in", delay).Msg("apply failed; retrying")
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// isolate finds the envelopes of a failing batch that violate the schema by
// bisection: each half is applied in its own transaction (its offset the
// sequence of its last item, the batch's upTo for the last half), a half
// that fails again is split again, and a single bad envelope is
// dead-lettered with its offset committed. One bad envelope among n costs
// about 2·log2(n) transactions instead of n, and every good one is applied
// in order with the rest of its half.
func (l *Loop) isolate(ctx context.Context, part Shard, items []Item, upTo uint64) error {
	if len(items) <= 1 {
		return l.applyRange(ctx, part, items, upTo)
	}
	mid := len(items) / 2
	if err := l.applyRange(ctx, part, items[:mid], items[mid-1].Delivery.Sequence); err != nil {
		return err
	}
	return l.applyRange(ctx, part, items[mid:], upTo)
}

// applyRange applies items in one transaction; on a data error it bisects
// (several items) or dead-letters the one item and commits its offset.
func (l *Loop) applyRange(ctx context.Context, part Shard, items []Item, upTo uint64) error {
	err := l.Applier.Apply(ctx, l.Stream, part, items, upTo)
	if err == nil || !errors.Is(err, ErrData) {
		if err != nil && len(items) > 0 && !errors.Is(err, ErrLeaseLost) {
			return fmt.Errorf("persistence: apply %s seq %d..%d: %w", items[0].Env.Type, items[0].Delivery.Sequence, upTo, err)
		}
		return err
	}
	if len(items) > 1 {
		return l.isolate(ctx, part, items, upTo)
	}
	if len(items) == 0 {
		return fmt.Errorf("persistence: apply offset %d: %w", upTo, err)
	}
	it := items[0]
	if err := l.deadLetter(ctx, it.Data, it.Delivery, err); err != nil {
		return err
	}
	if err := l.Applier.Apply(ctx, l.Stream, part, nil, upTo); err != nil {
		return fmt.Errorf("persistence: apply %s seq %d: %w", it.Env.Type, it.Delivery.Sequence, err)
	}
	return nil
}

// deadLetter stores one bad envelope of a batch (the batch is acknowledged
// as a whole).
func (l *Loop) deadLetter(ctx context.Context, data []byte, d bus.Delivery, cause error) error {
	if err := l.settler().DeadLetter(ctx, data, d, cause); err != nil {
		return fmt.Errorf("persistence: dead letter: %w", err)
	}
	return nil
}

// settler settles the loop's batches (bus.Settler).
func (l *Loop) settler() *bus.Settler {
	return &bus.Settler{Consumer: l.Consumer, DeadLetters: l.DLQ, Log: l.Log}
}

var tracer = otel.Tracer("github.com/alicia-voice/alicia/services/persistence")

// traceApplied adds to the trace of every envelope of a batch a span of
// its storing: the batch's transaction, from t0 to now (one transaction
// stores many envelopes of many traces; each trace shows when its own
// envelope was stored).
func traceApplied(ctx context.Context, stream string, parts [][]Item, t0 time.Time, batch int) {
	end := time.Now()
	for _, items := range parts {
		for _, it := range items {
			sc, ok := telemetry.SpanContextFromMeta(it.Env.Meta)
			if !ok {
				continue
			}
			_, span := tracer.Start(trace.ContextWithRemoteSpanContext(ctx, sc), "persistence.store "+it.Env.Type.String(),
				trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(t0), trace.WithAttributes(
					attribute.String("alicia.conversation_id", it.Env.ConversationID), attribute.String("messaging.destination.name", it.Delivery.Subject),
					attribute.String("alicia.stream", stream), attribute.Int64("alicia.stream_sequence", int64(it.Delivery.Sequence)),
					attribute.Int("alicia.batch_envelopes", batch)))
			span.End(trace.WithTimestamp(end))
		}
	}
}

// Package store applies protocol envelopes to PostgreSQL: one transaction per
// batch, idempotent statements keyed by protocol ids, and the stream offset
// written in the same transaction.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// Store writes envelopes to Postgres.
type Store struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	// streams holds, per stream name, the stream claimed by ClaimOffsets.
	streams map[string]Claim
}

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, streams: map[string]Claim{}} }

// EpochShift places a stream's epoch above its sequences in the ordering
// sequence (epoch<<EpochShift | seq) of rows ordered by stream sequence:
// room for 2^44 (1.7e13) messages per stream and 2^19 streams.
const EpochShift = 44

// Stream identifies one JetStream stream: its name and its creation time.
// A stream created anew under the same name numbers its messages from 1
// again, so a stored offset is only valid for the stream it was read from.
type Stream struct {
	Name    string
	Created string // creation time as JetStream reports it (RFC 3339, ns)
	LastSeq uint64 // the last sequence in it now
}

// Claim is what ClaimOffsets found and decided.
type Claim struct {
	Stream Stream
	// Offsets are the last sequences applied by the consumer and each of its
	// shards (named consumer/N), keyed by name; all zero after a reset.
	Offsets map[string]uint64
	// Epoch counts the streams of this name the database has consumed.
	Epoch int
	// Reset is set when the stored offsets belonged to another stream
	// (Previous, empty for rows older than stream identities, whose offset
	// lay beyond the stream's end): they were discarded and the stream is
	// applied from its first message.
	Reset    bool
	Previous string
	Stale    map[string]uint64 // the discarded offsets, for the log
}

// ClaimOffsets reads the stored offsets of consumer on stream and binds them
// to that stream in one transaction. Offsets stored for another stream are
// never used to skip anything: they are reset to 0 under a new epoch. Rows
// from before stream identities were recorded adopt this stream, unless
// their offset lies beyond its last sequence (then they cannot be its own).
func (s *Store) ClaimOffsets(ctx context.Context, st Stream, consumer string) (Claim, error) {
	c := Claim{Stream: st, Offsets: map[string]uint64{}}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT consumer, last_seq, stream_created, epoch FROM alicia_stream_offsets
			WHERE stream = $1 AND (consumer = $2 OR starts_with(consumer, $2 || '/')) FOR UPDATE`, st.Name, consumer)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name, created string
			var seq int64
			var epoch int
			if err := rows.Scan(&name, &seq, &created, &epoch); err != nil {
				rows.Close()
				return err
			}
			c.Offsets[name], c.Epoch = uint64(seq), max(c.Epoch, epoch)
			if created != st.Created && (created != "" || uint64(seq) > st.LastSeq) {
				c.Reset, c.Previous = true, created
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if c.Reset {
			c.Stale, c.Offsets = c.Offsets, map[string]uint64{}
			c.Epoch++
			_, err = tx.Exec(ctx, `UPDATE alicia_stream_offsets SET last_seq = 0, stream_created = $3, epoch = $4, updated_at = now(),
				owner = NULL, fence = fence + 1, lease_expires_at = NULL
				WHERE stream = $1 AND (consumer = $2 OR starts_with(consumer, $2 || '/'))`, st.Name, consumer, st.Created, c.Epoch)
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE alicia_stream_offsets SET stream_created = $3, epoch = $4
			WHERE stream = $1 AND (consumer = $2 OR starts_with(consumer, $2 || '/')) AND stream_created = ''`, st.Name, consumer, st.Created, c.Epoch)
		return err
	})
	if err != nil {
		return Claim{}, fmt.Errorf("store: offsets of %s: %w", st.Name, err)
	}
	s.mu.Lock()
	s.streams[st.Name] = c
	s.mu.Unlock()
	return c, nil
}

// claimed returns the claim of stream (the zero Claim when none was made).
func (s *Store) claimed(stream string) Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[stream]
}

// Apply writes items and the offset upTo of partition part in one
// transaction. With a lease (part.Owner set) the partition's row is locked
// first and the transaction fails with consume.ErrLeaseLost, writing
// nothing, unless the partition is still part.Owner's under part.Fence.
func (s *Store) Apply(ctx context.Context, stream string, part consume.Shard, items []consume.Item, upTo uint64) error {
	b := &pgx.Batch{}
	consumer := part.Name
	if part.Owner != "" {
		b.Queue(lockLeaseSQL, stream, consumer, part.Owner, part.Fence)
		b.Queue(leaseCheckSQL, stream, consumer, part.Owner, part.Fence)
	}
	c := s.claimed(stream)
	w := newWriter(b, stream, c.Epoch)
	w.conversations(items)
	for i := range items {
		if err := w.envelope(&items[i]); err != nil {
			return fmt.Errorf("%w: %s at seq %d: %w", consume.ErrData, items[i].Env.Type, items[i].Delivery.Sequence, err)
		}
	}
	w.flush()
	b.Queue(`INSERT INTO alicia_stream_offsets (stream, consumer, last_seq, stream_created, epoch) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (stream, consumer) DO UPDATE SET last_seq = GREATEST(alicia_stream_offsets.last_seq, EXCLUDED.last_seq), updated_at = now()`,
		stream, consumer, int64(upTo), c.Stream.Created, c.Epoch)

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return classify(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err)
	}
	return nil
}

// classify marks errors caused by the data (constraint violations, bad
// values) so the caller isolates the culprit instead of retrying forever.
func classify(err error) error {
	if what, ok := leaseLost(err); ok {
		return errLeaseLost(what)
	}
	if what, ok := notOwned(err); ok {
		return fmt.Errorf("%w: %w", consume.ErrData, notOwnedError(what))
	}
	if what, ok := markedFailure(err, missingMarker); ok {
		return fmt.Errorf("%w: %w: %s", consume.ErrData, errUnknownRef, what)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "23503" { // foreign_key_violation
			return fmt.Errorf("%w: %s: %s", consume.ErrMissingRef, pgErr.Message, pgErr.Detail)
		}
		switch pgErr.Code[:2] {
		case "22", "23", "42": // data exception, integrity violation, undefined object
			return fmt.Errorf("%w: %s (%s): %s", consume.ErrData, pgErr.Message, pgErr.Code, pgErr.Detail)
		}
	}
	return fmt.Errorf("store: %w", err)
}

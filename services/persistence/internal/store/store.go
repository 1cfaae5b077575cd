// Package store applies protocol envelopes to PostgreSQL: one transaction per
// batch, idempotent statements keyed by protocol ids, and the stream offset
// written in the same transaction.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// Store writes envelopes to Postgres.
type Store struct{ pool *pgxpool.Pool }

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Offsets returns the last stream sequence applied on stream by consumer and
// by each of its shards (named consumer/N), keyed by name.
func (s *Store) Offsets(ctx context.Context, stream, consumer string) (map[string]uint64, error) {
	rows, err := s.pool.Query(ctx, `SELECT consumer, last_seq FROM alicia_stream_offsets
		WHERE stream = $1 AND (consumer = $2 OR starts_with(consumer, $2 || '/'))`, stream, consumer)
	if err != nil {
		return nil, fmt.Errorf("store: offsets: %w", err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var name string
		var seq int64
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, fmt.Errorf("store: offsets: %w", err)
		}
		out[name] = uint64(seq)
	}
	return out, rows.Err()
}

// Apply writes items and the offset upTo in one transaction.
func (s *Store) Apply(ctx context.Context, stream, consumer string, items []consume.Item, upTo uint64) error {
	b := &pgx.Batch{}
	w := newWriter(b, stream)
	w.conversations(items)
	for i := range items {
		if err := w.envelope(&items[i]); err != nil {
			return fmt.Errorf("%w: %s at seq %d: %w", consume.ErrData, items[i].Env.Type, items[i].Delivery.Sequence, err)
		}
	}
	w.flush()
	b.Queue(`INSERT INTO alicia_stream_offsets (stream, consumer, last_seq) VALUES ($1, $2, $3)
		ON CONFLICT (stream, consumer) DO UPDATE SET last_seq = GREATEST(alicia_stream_offsets.last_seq, EXCLUDED.last_seq), updated_at = now()`,
		stream, consumer, int64(upTo))

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

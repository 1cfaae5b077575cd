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

// Offset returns the last stream sequence applied by consumer on stream.
func (s *Store) Offset(ctx context.Context, stream, consumer string) (uint64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM alicia_stream_offsets WHERE stream = $1 AND consumer = $2`, stream, consumer).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: offset: %w", err)
	}
	return uint64(seq), nil
}

// ResetOffset forgets the offset of consumer on stream, so a replay of the
// stream is applied again (and must change nothing).
func (s *Store) ResetOffset(ctx context.Context, stream, consumer string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM alicia_stream_offsets WHERE stream = $1 AND consumer = $2`, stream, consumer)
	return err
}

// Apply writes items and the offset upTo in one transaction.
func (s *Store) Apply(ctx context.Context, stream, consumer string, items []consume.Item, upTo uint64) error {
	b := &pgx.Batch{}
	w := newWriter(b)
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

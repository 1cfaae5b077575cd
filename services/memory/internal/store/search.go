package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// Query is a vector search of one user's memories.
type Query struct {
	UserID    string
	Vector    []float32
	Pinned    int     // at most this many pinned memories, first
	Limit     int     // at most this many matches after them
	Threshold float64 // least cosine similarity of a match
	// RatingWeight moves a rated memory in the order of the matches: each
	// star above or below 3 counts as this much similarity (0: ratings
	// are ignored). The threshold applies to the similarity alone.
	RatingWeight float64
}

// Search returns the user's pinned memories (most important first, up to
// q.Pinned), then the nearest other memories with a similarity of at least
// q.Threshold, best first (up to q.Limit): by similarity plus
// q.RatingWeight per star of the person's rating above 3 (minus below), so
// a memory rated 5 comes before an equally near unrated one and one rated 1
// after it. Archived and deleted memories are never returned.
//
// Which scan finds the nearest memories is decided here, not left to the
// planner, which does not count the cost of reading 4 KB vectors out of
// TOAST: for a user with few memories an exact scan of them is cheapest; for
// one with many, the HNSW index with the user filter applied during the
// scan (pgvector 0.8's iterative scan keeps walking the graph until enough
// rows pass the filter, so a user owning a small share of the table still
// gets a full top-k). An HNSW scan for k rows of a user holding n of N rows
// reads about 22·k·N/n pages, an exact scan about 5·n, so the exact scan
// wins below n ≈ √(4.4·k·N), and at least below 1,000.
func (s *Store) Search(ctx context.Context, q Query) ([]rpc.Memory, error) {
	vec := pgvector.NewVector(q.Vector)
	// Two round trips: the transaction's BEGIN and COMMIT travel in the
	// batches. A connection given back inside a transaction (after an
	// error) is closed by the pool, never reused.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: search: %w", err)
	}
	defer conn.Release()

	b := &pgx.Batch{}
	b.Queue(`BEGIN READ ONLY`)
	s.queueSettings(b)
	b.Queue(`SELECT l.lim, (SELECT count(*) FROM (
				SELECT 1 FROM alicia_memory WHERE user_id = $1 AND NOT archived AND deleted_at IS NULL LIMIT l.lim) n)::int
		FROM (SELECT greatest(1000, sqrt(4.4 * $2::float8 * greatest(reltuples, 0)))::int AS lim
			FROM pg_class WHERE oid = 'alicia_memory'::regclass) l`, q.UserID, q.Limit)
	// Similarity computed after the LIMIT: only for the pinned rows returned.
	b.Queue(`SELECT id, content, tags, importance, pinned, archived,
			CASE WHEN embeddings IS NULL THEN 0 ELSE 1 - (embeddings <=> $2) END, created_at, updated_at, user_rating
		FROM (
			SELECT id, content, tags, importance, pinned, archived, embeddings, created_at, updated_at, user_rating
			FROM alicia_memory
			WHERE user_id = $1 AND pinned AND NOT archived AND deleted_at IS NULL
			ORDER BY importance DESC, updated_at DESC
			LIMIT $3
		) p
		ORDER BY importance DESC, updated_at DESC`, q.UserID, vec, q.Pinned)
	br := conn.SendBatch(ctx, b)
	var exactBelow, owned int
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&exactBelow, &owned)
	}
	var pinned []rpc.Memory
	if err == nil {
		pinned, err = collect(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: search: %w", err)
	}

	b = &pgx.Batch{}
	if owned < exactBelow {
		b.Queue(`SELECT set_config('enable_indexscan', 'off', true)`)
	} else {
		b.Queue(`SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`)
	}
	// When every pinned memory is already in, pinned rows are left out of
	// the scan (a filtered HNSW scan costs in proportion to the rows it
	// must find); otherwise the pinned rows returned are asked for too and
	// skipped below. Materialised so the outer filter and ORDER BY do not
	// push into the index scan (relaxed_order may return rows slightly out
	// of order).
	allPinned, limit := len(pinned) < q.Pinned, q.Limit+len(pinned)
	if allPinned {
		limit = q.Limit
	}
	b.Queue(`WITH nearest AS MATERIALIZED (
			SELECT id, content, tags, importance, pinned, archived, embeddings <=> $2 AS distance, created_at, updated_at, user_rating
			FROM alicia_memory
			WHERE user_id = $1 AND NOT archived AND deleted_at IS NULL AND embeddings IS NOT NULL AND NOT (pinned AND $5)
			ORDER BY embeddings <=> $2
			LIMIT $3
		)
		SELECT id, content, tags, importance, pinned, archived, 1 - distance, created_at, updated_at, user_rating
		FROM nearest WHERE distance <= $4
		ORDER BY distance - $6::float8 * (COALESCE(user_rating, 3) - 3), distance`, q.UserID, vec, limit, 1-q.Threshold, allPinned, q.RatingWeight)
	b.Queue(`COMMIT`)
	br = conn.SendBatch(ctx, b)
	var near []rpc.Memory
	_, err = br.Exec()
	if err == nil {
		near, err = collect(br)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: nearest memories: %w", err)
	}

	out := pinned
	seen := make(map[string]bool, len(pinned))
	for _, m := range pinned {
		seen[m.ID] = true
	}
	n := 0
	for _, m := range near {
		if n == q.Limit {
			break
		}
		if !seen[m.ID] {
			out = append(out, m)
			n++
		}
	}
	return out, nil
}

func collect(br pgx.BatchResults) ([]rpc.Memory, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (rpc.Memory, error) {
		var m rpc.Memory
		var created, updated time.Time
		err := row.Scan(&m.ID, &m.Content, &m.Tags, &m.Importance, &m.Pinned, &m.Archived, &m.Similarity, &created, &updated, &m.UserRating)
		m.CreatedAt, m.UpdatedAt = created.UnixMilli(), updated.UnixMilli()
		if m.Tags == nil {
			m.Tags = []string{}
		}
		return m, err
	})
}

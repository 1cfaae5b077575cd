// Package store reads Alicia's memories from Postgres through read-only
// sessions: vector search, single memories and the turns extraction needs.
// It never writes; persistence does.
package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// Store is the read side of alicia_memory.
type Store struct {
	pool     *pgxpool.Pool
	efSearch string
}

// Open connects to Postgres with every transaction read-only and the
// pgvector types registered.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	pool, err := pgread.Open(ctx, url, func(cfg *pgxpool.Config) {
		if maxConns > 0 {
			cfg.MaxConns = maxConns
		}
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			return pgxvec.RegisterTypes(ctx, conn)
		}
	})
	if err != nil {
		return nil, err
	}
	return pool, nil
}

// New returns a store on pool; efSearch is hnsw.ef_search for searches.
func New(pool *pgxpool.Pool, efSearch int) *Store {
	return &Store{pool: pool, efSearch: strconv.Itoa(efSearch)}
}

// Memory is one row of alicia_memory.
type Memory struct {
	rpc.Memory
	UserID       string
	Deleted      bool
	HasEmbedding bool
}

const memoryColumns = `id, COALESCE(user_id, ''), content, tags, importance, pinned, archived,
	deleted_at IS NOT NULL, embeddings IS NOT NULL, created_at, updated_at, user_rating, COALESCE(created_by, ''), source_info`

func scanMemory(row pgx.Row) (Memory, error) {
	var m Memory
	var created, updated time.Time
	err := row.Scan(&m.ID, &m.UserID, &m.Content, &m.Tags, &m.Importance, &m.Pinned, &m.Archived,
		&m.Deleted, &m.HasEmbedding, &created, &updated, &m.UserRating, &m.CreatedBy, &m.SourceInfo)
	m.CreatedAt, m.UpdatedAt = created.UnixMilli(), updated.UnixMilli()
	if len(m.SourceInfo) == 0 {
		m.SourceInfo = nil
	}
	if m.Tags == nil {
		m.Tags = []string{}
	}
	return m, err
}

// Get returns the memory id, deleted or not, whoever owns it.
func (s *Store) Get(ctx context.Context, id string) (Memory, error) {
	m, err := scanMemory(s.pool.QueryRow(ctx, `SELECT `+memoryColumns+` FROM alicia_memory WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Memory{}, fmt.Errorf("memory %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Memory{}, fmt.Errorf("store: memory %s: %w", id, err)
	}
	return m, nil
}

// Nearest returns the user's memory closest to vec, archived ones included
// (deleted ones not), and its cosine similarity; ErrNotFound when the user
// has none with an embedding.
func (s *Store) Nearest(ctx context.Context, userID string, vec []float32) (Memory, float64, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return Memory{}, 0, fmt.Errorf("store: nearest: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	b := &pgx.Batch{}
	s.queueSettings(b)
	b.Queue(`SELECT `+memoryColumns+`, 1 - (embeddings <=> $2)
		FROM alicia_memory
		WHERE user_id = $1 AND deleted_at IS NULL AND embeddings IS NOT NULL
		ORDER BY embeddings <=> $2
		LIMIT 1`, userID, pgvector.NewVector(vec))
	br := tx.SendBatch(ctx, b)
	var m Memory
	var sim float64
	_, err = br.Exec()
	if err == nil {
		m, sim, err = scanNearest(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Memory{}, 0, ErrNotFound
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return Memory{}, 0, fmt.Errorf("store: nearest: %w", err)
	}
	return m, sim, nil
}

func scanNearest(row pgx.Row) (Memory, float64, error) {
	var m Memory
	var sim float64
	var created, updated time.Time
	err := row.Scan(&m.ID, &m.UserID, &m.Content, &m.Tags, &m.Importance, &m.Pinned, &m.Archived,
		&m.Deleted, &m.HasEmbedding, &created, &updated, &m.UserRating, &m.CreatedBy, &m.SourceInfo, &sim)
	m.CreatedAt, m.UpdatedAt = created.UnixMilli(), updated.UnixMilli()
	if m.Tags == nil {
		m.Tags = []string{}
	}
	return m, sim, err
}

// queueSettings makes the search transaction's HNSW scans iterative, so rows
// the filter drops are replaced by further neighbours, and sets ef_search.
func (s *Store) queueSettings(b *pgx.Batch) {
	b.Queue(`SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true)`, s.efSearch)
}

// Package pgread opens the Postgres pools of services that only read:
// persistence is the only writer, so every other service's transactions are
// read-only (default_transaction_read_only), and a stray write fails.
package pgread

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Option adjusts the pool configuration before the pool is made.
type Option func(*pgxpool.Config)

// Open returns a pool on url whose every transaction is read-only.
func Open(ctx context.Context, url string, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}

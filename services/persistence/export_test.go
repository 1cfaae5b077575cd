package persistence

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// SweepOnce runs one sweep as the service does, at now.
func SweepOnce(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream, after time.Duration, now time.Time) (int, error) {
	s := newSweeper(pool, js, after, zerolog.Nop())
	s.now = func() time.Time { return now }
	return s.once(ctx)
}

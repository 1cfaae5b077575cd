package pgread

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/migrations"
)

// SchemaWait bounds how long WaitForSchema waits by default: long enough for
// a database server to start and a migration job to run, short enough that
// a service pointed at the wrong database stops with the reason (and its
// supervisor restarts it).
const SchemaWait = 10 * time.Minute

// maxRetryDelay caps the delay between two checks.
const maxRetryDelay = 5 * time.Second

// ErrSchema is returned when the schema did not become ready in time.
var ErrSchema = errors.New("database schema not ready")

// Need says what a service waits for before it opens its pools.
type Need int

const (
	// Reachable: the server answers (a service that migrates itself).
	Reachable Need = iota
	// Schema: every migration of this build is applied (which also brings
	// the pgvector types), so nothing is read or registered before it exists.
	Schema
)

// WaitForSchema blocks until the database at url is reachable and, with
// Schema, has every migration of this build applied. Each unsuccessful check
// is logged with what is missing and when the next one comes; the delay
// doubles from 250 ms up to 5 s. It gives up with ErrSchema after limit
// (SchemaWait when 0), and returns ctx's error when ctx ends first. A
// refusal no wait cures — a wrong password or role (SQLSTATE 28P01,
// 28000), a database that does not exist (3D000) — is returned at once.
func WaitForSchema(ctx context.Context, url string, need Need, limit time.Duration, log zerolog.Logger) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("postgres URL: %w", err)
	}
	if limit <= 0 {
		limit = SchemaWait
	}
	deadline := time.Now().Add(limit)
	delay := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := checkSchema(ctx, cfg, need)
		if err == nil {
			if attempt > 1 {
				log.Info().Int("attempts", attempt).Msg("database schema ready")
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && (pe.Code == "28P01" || pe.Code == "28000" || pe.Code == "3D000") {
			return fmt.Errorf("postgres refuses the connection (%s): %w", pe.Code, err)
		}
		if !time.Now().Add(delay).Before(deadline) {
			return fmt.Errorf("%w after %s: %w", ErrSchema, limit, err)
		}
		log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", delay).Msg("waiting for the database")
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

// checkSchema connects once and reports what is missing.
func checkSchema(ctx context.Context, cfg *pgx.ConnConfig, need Need) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("postgres unreachable: %w", err)
	}
	if need == Reachable {
		return nil
	}
	pending, err := migrations.Pending(ctx, db)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("migrations not applied yet: %v (run `alicia migrate up`, or start persistence, which applies them)", pending)
	}
	return nil
}

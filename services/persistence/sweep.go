package persistence

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// The sweep closes what a crash left open. An answer still pending or
// streaming long after any turn could still be writing it (its llm replica
// died, and the turn was given up or the whole installation stopped) never
// ends by itself: the sweep publishes, for each, the ErrorMessage its turn
// would have sent (code 501, originatingId the answer), on the
// conversation's server subject like any answer's error. Persistence
// applies it as every ErrorMessage: the answer failed, its unfinished
// sentences failed, its tool uses still pending or running cancelled; the
// client that has the conversation open is told. Being an envelope, it is
// in the stream: a rebuild from the streams ends in the same rows. Several
// instances may sweep at once: the Nats-Msg-Id (sweep:<answer id>) makes
// one envelope of it.

// sweepBatch bounds the answers one sweep closes.
const sweepBatch = 100

// sweeper finds the stale answers and publishes their end.
type sweeper struct {
	pool *pgxpool.Pool
	pub  *bus.Publisher
	// after: an answer untouched this long is stale (ALICIA_PERSISTENCE_SWEEP_AFTER).
	after time.Duration
	log   zerolog.Logger
	now   func() time.Time
}

// staleAnswer is an open answer untouched since before the cut-off.
type staleAnswer struct{ id, cid string }

// once closes the stale answers found now; it returns how many.
func (s *sweeper) once(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.after)
	rows, err := s.pool.Query(ctx, `SELECT m.id, m.conversation_id FROM alicia_messages m
		WHERE m.deleted_at IS NULL AND m.completion_status IN ('pending', 'streaming') AND m.message_role = 'assistant'
			AND m.updated_at < $1
			AND NOT EXISTS (SELECT 1 FROM alicia_sentences s WHERE s.message_id = m.id AND s.deleted_at IS NULL AND s.updated_at >= $1)
		ORDER BY m.updated_at LIMIT $2`, cutoff, sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("persistence: sweep: %w", err)
	}
	stale, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (staleAnswer, error) {
		var a staleAnswer
		return a, r.Scan(&a.id, &a.cid)
	})
	if err != nil {
		return 0, fmt.Errorf("persistence: sweep: %w", err)
	}
	for _, a := range stale {
		e := &protocol.ErrorMessage{ID: protocol.DeriveID("aerr", a.cid, a.id, "sweep"), ConversationID: a.cid, Code: protocol.CodeInternal,
			Message:  "this answer was cut off: the service writing it stopped, and it was never completed; ask again",
			Severity: 2, Recoverable: true, OriginatingID: protocol.Ptr(a.id)}
		if _, err := s.pub.PublishServer(ctx, protocol.New(a.cid, e), "sweep:"+a.id); err != nil {
			return 0, fmt.Errorf("persistence: sweep: publish the end of %s: %w", a.id, err)
		}
		s.log.Warn().Str("conversation_id", a.cid).Str("message_id", a.id).Msg("sweep: an answer left open by a crash is closed as failed")
	}
	return len(stale), nil
}

// run sweeps every interval until ctx ends.
func (s *sweeper) run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.once(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("sweep")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func newSweeper(pool *pgxpool.Pool, js jetstream.JetStream, after time.Duration, log zerolog.Logger) *sweeper {
	return &sweeper{pool: pool, pub: bus.NewPublisher(js), after: after, log: log.With().Str("worker", "sweep").Logger(), now: time.Now}
}

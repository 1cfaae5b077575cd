package timers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Querier reads Postgres; a *pgxpool.Pool on a read-only session fits.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// loadScheduled reads every scheduled timer.
func loadScheduled(ctx context.Context, db Querier) ([]*protocol.Timer, error) {
	rows, err := db.Query(ctx, `SELECT id, user_id, conversation_id, kind, label, due_at, time_zone, created_at, state_at
		FROM alicia_timers WHERE status = 'scheduled'`)
	if err != nil {
		return nil, fmt.Errorf("timers: read alicia_timers: %w", err)
	}
	defer rows.Close()
	var out []*protocol.Timer
	for rows.Next() {
		var t protocol.Timer
		var kind, label, zone string
		var due, created, state time.Time
		if err := rows.Scan(&t.ID, &t.UserID, &t.ConversationID, &kind, &label, &due, &zone, &created, &state); err != nil {
			return nil, fmt.Errorf("timers: read alicia_timers: %w", err)
		}
		t.Kind, t.Status = protocol.TimerKind(kind), protocol.TimerStatusScheduled
		t.DueAt, t.CreatedAt, t.Timestamp = due.UnixMilli(), created.UnixMilli(), state.UnixMilli()
		if label != "" {
			t.Label = &label
		}
		t.TimeZone = &zone
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("timers: read alicia_timers: %w", err)
	}
	return out, nil
}

// timerStatus is a timer's stored status ("" when it is not stored yet).
func timerStatus(ctx context.Context, db Querier, id string) (string, error) {
	var status string
	err := db.QueryRow(ctx, `SELECT status FROM alicia_timers WHERE id = $1`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("timers: read alicia_timers: %w", err)
	}
	return status, nil
}

// conversationTip is the conversation's newest message on its current
// branch ("" when it has none) and whether the conversation is there (not
// deleted).
func conversationTip(ctx context.Context, db Querier, cid string) (tip string, ok bool, err error) {
	var t *string
	var status string
	err = db.QueryRow(ctx, `SELECT tip_message_id, status::text FROM alicia_conversations WHERE id = $1`, cid).Scan(&t, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("timers: read alicia_conversations: %w", err)
	}
	if status == "deleted" {
		return "", false, nil
	}
	if t != nil {
		tip = *t
	}
	return tip, true, nil
}

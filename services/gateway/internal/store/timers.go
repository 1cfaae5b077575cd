package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/restapi"
)

// Timer is a timer or reminder as GET /v1/timers shows it.
type Timer = restapi.Timer

const timerColumns = `id, conversation_id, kind, label, due_at, time_zone, status, delivered_as, message_id, created_at, COALESCE(fired_at, cancelled_at)`

func scanTimer(row pgx.Row) (Timer, error) {
	var t Timer
	var due, created time.Time
	var ended *time.Time
	if err := row.Scan(&t.ID, &t.ConversationID, &t.Kind, &t.Label, &due, &t.TimeZone, &t.Status, &t.DeliveredAs, &t.MessageID, &created, &ended); err != nil {
		return Timer{}, err
	}
	t.DueAt, t.CreatedAt = ms(due), ms(created)
	if ended != nil {
		e := ms(*ended)
		t.EndedAt = &e
	}
	return t, nil
}

// Timers are the person's scheduled timers (soonest first) and those that
// fired or were cancelled since recent (newest first), at most limit.
func (s *Store) Timers(ctx context.Context, user string, recent time.Time, limit int) ([]Timer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+timerColumns+` FROM alicia_timers
		WHERE user_id = $1 AND (status = 'scheduled' OR state_at >= $2)
		ORDER BY status <> 'scheduled', CASE WHEN status = 'scheduled' THEN due_at END ASC, state_at DESC, id
		LIMIT $3`, user, recent, limit)
	if err != nil {
		return nil, fmt.Errorf("store: timers: %w", err)
	}
	defer rows.Close()
	out := []Timer{}
	for rows.Next() {
		t, err := scanTimer(rows)
		if err != nil {
			return nil, fmt.Errorf("store: timers: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: timers: %w", err)
	}
	return out, nil
}

// TimerOf is one of the person's timers, with its owner and the raw
// fields a Timer envelope needs.
func (s *Store) TimerOf(ctx context.Context, user, id string) (Timer, string, error) {
	var owner *string
	row := s.pool.QueryRow(ctx, `SELECT `+timerColumns+`, user_id FROM alicia_timers WHERE id = $1`, id)
	var t Timer
	var due, created time.Time
	var ended *time.Time
	err := row.Scan(&t.ID, &t.ConversationID, &t.Kind, &t.Label, &due, &t.TimeZone, &t.Status, &t.DeliveredAs, &t.MessageID, &created, &ended, &owner)
	if err := owned(err, owner, user, "timer"); err != nil {
		return Timer{}, "", err
	}
	t.DueAt, t.CreatedAt = ms(due), ms(created)
	if ended != nil {
		e := ms(*ended)
		t.EndedAt = &e
	}
	return t, *owner, nil
}

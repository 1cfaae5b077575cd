package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

const memoryColumns = `id, content, tags, importance, pinned, archived, created_at, updated_at, user_id,
	user_rating, COALESCE(created_by, ''), source_info`

type memoryRow struct {
	m       rpc.Memory
	updated time.Time
	owner   *string
}

func scanMemory(row pgx.Row) (memoryRow, error) {
	var r memoryRow
	var created time.Time
	err := row.Scan(&r.m.ID, &r.m.Content, &r.m.Tags, &r.m.Importance, &r.m.Pinned, &r.m.Archived, &created, &r.updated, &r.owner,
		&r.m.UserRating, &r.m.CreatedBy, &r.m.SourceInfo)
	if len(r.m.SourceInfo) == 0 {
		r.m.SourceInfo = nil
	}
	if r.m.Tags == nil {
		r.m.Tags = []string{}
	}
	r.m.CreatedAt, r.m.UpdatedAt = ms(created), ms(r.updated)
	return r, err
}

// Memory returns memory id if user owns it (archived ones included).
func (s *Store) Memory(ctx context.Context, user, id string) (rpc.Memory, error) {
	r, err := scanMemory(s.pool.QueryRow(ctx, `SELECT `+memoryColumns+` FROM alicia_memory WHERE id = $1 AND deleted_at IS NULL`, id))
	if err := owned(err, r.owner, user, "memory"); err != nil {
		return rpc.Memory{}, err
	}
	return r.m, nil
}

// ListMemories selects a page of a user's memories.
type ListMemories struct {
	User            string
	IncludeArchived bool
	Limit           int
	After           *Cursor
}

// Memories returns a page, pinned first, then most recently updated, and the
// cursor of the next page (nil on the last one).
func (s *Store) Memories(ctx context.Context, q ListMemories) ([]rpc.Memory, *Cursor, error) {
	after := Cursor{Pinned: true, At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if q.After != nil {
		after = *q.After
	}
	rows, err := s.pool.Query(ctx, `SELECT `+memoryColumns+` FROM alicia_memory
		WHERE user_id = $1 AND deleted_at IS NULL AND (NOT archived OR $2)
		  AND (pinned, updated_at, id) < ($3, $4, $5)
		ORDER BY pinned DESC, updated_at DESC, id DESC
		LIMIT $6`, q.User, q.IncludeArchived, after.Pinned, after.At, after.ID, q.Limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("store: memories: %w", err)
	}
	defer rows.Close()
	var page []memoryRow
	for rows.Next() {
		r, err := scanMemory(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("store: memories: %w", err)
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: memories: %w", err)
	}
	var next *Cursor
	if len(page) > q.Limit {
		page = page[:q.Limit]
		last := page[len(page)-1]
		next = &Cursor{Pinned: last.m.Pinned, At: last.updated, ID: last.m.ID}
	}
	out := make([]rpc.Memory, len(page))
	for i, r := range page {
		out[i] = r.m
	}
	return out, next, nil
}

package store

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Votes are the aggregates of one vote target and the user's own vote.
type Votes = restapi.VoteResult

// VoteCounts are the votes on a target and the user's own.
type VoteCounts = restapi.Votes

// VotesOf returns the aggregates of a target and user's vote on it.
func (s *Store) VotesOf(ctx context.Context, user, targetType, targetID string) (Votes, error) {
	v := Votes{TargetType: targetType, TargetID: targetID}
	err := s.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE vote = 'up'), count(*) FILTER (WHERE vote = 'down'), count(*) FILTER (WHERE vote = 'critical'),
			(SELECT vote::text FROM alicia_votes WHERE target_type = $1::feedback_target_type AND target_id = $2
				AND user_id = $3 AND deleted_at IS NULL)
		FROM alicia_votes WHERE target_type = $1::feedback_target_type AND target_id = $2 AND deleted_at IS NULL`,
		targetType, targetID, user).Scan(&v.Upvotes, &v.Downvotes, &v.SpecialVotes, &v.UserVote)
	if err != nil {
		return Votes{}, fmt.Errorf("store: votes: %w", err)
	}
	return v, nil
}

// targetQueries find a vote target ($2) that belongs to message $1 or, for
// a memory, to user $1. The query is picked by target type, never built.
var targetQueries = map[string]string{
	"sentence":     `SELECT 1 FROM alicia_sentences WHERE id = $2 AND message_id = $1 AND deleted_at IS NULL`,
	"tool_use":     `SELECT 1 FROM alicia_tool_uses WHERE id = $2 AND message_id = $1 AND deleted_at IS NULL`,
	"reasoning":    `SELECT 1 FROM alicia_reasoning_steps WHERE id = $2 AND message_id = $1 AND deleted_at IS NULL`,
	"memory_usage": `SELECT 1 FROM alicia_memory_used WHERE id = $2 AND message_id = $1 AND deleted_at IS NULL`,
	"memory":       `SELECT 1 FROM alicia_memory WHERE id = $2 AND user_id = $1 AND deleted_at IS NULL`,
}

// TargetExists reports whether a vote target of targetType exists for
// message mid (a message target is the message itself; a memory one is a
// memory of user's).
func (s *Store) TargetExists(ctx context.Context, user, mid, targetType, targetID string) (bool, error) {
	if targetType == "message" {
		return targetID == mid, nil
	}
	q, ok := targetQueries[targetType]
	if !ok {
		return false, nil
	}
	owner := mid
	if targetType == "memory" {
		owner = user
	}
	var one int
	err := s.pool.QueryRow(ctx, q, owner, targetID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: vote target: %w", err)
	}
	return true, nil
}

// Note is a user's note on a message.
type Note = restapi.Note

// Notes lists the notes on message mid, oldest first.
func (s *Store) Notes(ctx context.Context, mid string) ([]Note, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, content, category::text, created_at FROM alicia_notes
		WHERE message_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`, mid)
	if err != nil {
		return nil, fmt.Errorf("store: notes: %w", err)
	}
	defer rows.Close()
	out := []Note{}
	for rows.Next() {
		var n Note
		var at time.Time
		if err := rows.Scan(&n.ID, &n.Content, &n.Category, &at); err != nil {
			return nil, fmt.Errorf("store: notes: %w", err)
		}
		n.CreatedAt = ms(at)
		out = append(out, n)
	}
	return out, rows.Err()
}

// NoteRef is a note and where it lives.
type NoteRef struct {
	Note
	MessageID      string
	ConversationID string
}

// Note returns note id if user owns its conversation.
func (s *Store) Note(ctx context.Context, user, id string) (NoteRef, error) {
	var n NoteRef
	var at time.Time
	var owner *string
	err := s.pool.QueryRow(ctx, `SELECT n.id, n.content, n.category::text, n.created_at, n.message_id, c.id, c.user_id
		FROM alicia_notes n JOIN alicia_conversations c ON c.id = n.conversation_id
		WHERE n.id = $1 AND n.deleted_at IS NULL AND c.deleted_at IS NULL AND c.status <> 'deleted'`, id).
		Scan(&n.ID, &n.Content, &n.Category, &at, &n.MessageID, &n.ConversationID, &owner)
	if err := owned(err, owner, user, "note"); err != nil {
		return NoteRef{}, err
	}
	n.CreatedAt = ms(at)
	return n, nil
}

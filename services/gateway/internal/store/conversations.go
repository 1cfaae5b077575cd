package store

import (
	"errors"

	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Conversation is a conversation's metadata, as the REST API answers it
// (restapi.Conversation), and when it was updated to the nanosecond (the
// cursor of a page).
type Conversation struct {
	restapi.Conversation

	updatedAt time.Time
}

const conversationColumns = `c.id, c.title, c.status::text, c.created_at, c.updated_at,
	(SELECT count(*) FROM alicia_messages m WHERE m.conversation_id = c.id AND m.deleted_at IS NULL),
	c.tip_message_id, c.last_client_stanza_id, c.user_id`

func scanConversation(row pgx.Row) (Conversation, *string, error) {
	var c Conversation
	var created time.Time
	var owner *string
	err := row.Scan(&c.ID, &c.Title, &c.Status, &created, &c.updatedAt, &c.MessageCount, &c.TipMessageID, &c.LastClientStanzaID, &owner)
	c.CreatedAt, c.UpdatedAt = ms(created), ms(c.updatedAt)
	return c, owner, err
}

// Conversation returns conversation cid if user owns it.
func (s *Store) Conversation(ctx context.Context, user, cid string) (Conversation, error) {
	c, owner, err := scanConversation(s.pool.QueryRow(ctx, `SELECT `+conversationColumns+`
		FROM alicia_conversations c WHERE c.id = $1 AND c.deleted_at IS NULL AND c.status <> 'deleted'`, cid))
	if err := owned(err, owner, user, "conversation"); err != nil {
		return Conversation{}, err
	}
	return c, nil
}

// ListConversations selects a page of a user's conversations.
type ListConversations struct {
	User string
	// Statuses to include (active, archived); deleted ones never are.
	Statuses []string
	// Title, when not empty, keeps the conversations whose title contains
	// it, ignoring case.
	Title string
	Limit int
	After *Cursor
}

// Conversations returns a page, most recently updated first, and the cursor
// of the next page (nil on the last one).
func (s *Store) Conversations(ctx context.Context, q ListConversations) ([]Conversation, *Cursor, error) {
	after := Cursor{At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if q.After != nil {
		after = *q.After
	}
	var title *string // NULL: no filter
	if q.Title != "" {
		p := "%" + likeEscaper.Replace(q.Title) + "%"
		title = &p
	}
	rows, err := s.pool.Query(ctx, `SELECT `+conversationColumns+`
		FROM alicia_conversations c
		WHERE c.user_id = $1 AND c.deleted_at IS NULL AND c.status::text = ANY($2)
		  AND (c.updated_at, c.id) < ($3, $4)
		  AND ($6::text IS NULL OR c.title ILIKE $6 ESCAPE '\')
		ORDER BY c.updated_at DESC, c.id DESC
		LIMIT $5`, q.User, q.Statuses, after.At, after.ID, q.Limit+1, title)
	if err != nil {
		return nil, nil, fmt.Errorf("store: conversations: %w", err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		c, _, err := scanConversation(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("store: conversations: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: conversations: %w", err)
	}
	if len(out) <= q.Limit {
		return out, nil, nil
	}
	out = out[:q.Limit]
	last := out[len(out)-1]
	return out, &Cursor{At: last.updatedAt, ID: last.ID}, nil
}

// likeEscaper makes text match itself in a LIKE pattern with ESCAPE '\':
// its %, _ and \ are literal.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// LastVoiceSession is the conversation's last voice call (SessionStats),
// or nil when none has ended.
func (s *Store) LastVoiceSession(ctx context.Context, cid string) (*restapi.VoiceSession, error) {
	var v restapi.VoiceSession
	var began, ended *time.Time
	err := s.pool.QueryRow(ctx, `SELECT message_count, tool_call_count, memories_used, session_duration_ms, session_started_at, last_activity_at
		FROM alicia_session_stats WHERE conversation_id = $1`, cid).Scan(&v.MessageCount, &v.ToolCallCount, &v.MemoriesUsed, &v.DurationMs, &began, &ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: session stats: %w", err)
	}
	if began != nil {
		v.StartedAt = ms(*began)
	}
	if ended != nil {
		v.EndedAt = ms(*ended)
	}
	return &v, nil
}

package optimize

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Querier is what Load reads with (a pgxpool.Pool, a read-only session).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Scope is whose conversations a run learns from: one person's own
// (UserIDs has them alone), or, for an installation-wide run, the
// administrator's and those of the people who opted in — the caller
// decides who is in UserIDs; Load reads nothing else.
type Scope struct {
	UserIDs []string
	// Owner is the person whose answers a personal run changes (the texts
	// serving them seed it); "" for an installation-wide run.
	Owner string
}

// historyTurns: the messages of the branch kept before a question.
const historyTurns = 6

// Load reads up to limit stored turns of the scope's conversations, the
// most recent first among those the person said something about (a vote
// or a note), then the others: an answer completed, not deleted, whose
// previous message is the person's question.
func Load(ctx context.Context, db Querier, s Scope, limit int) ([]Turn, error) {
	if len(s.UserIDs) == 0 {
		return nil, errors.New("optimize: a run's scope names nobody")
	}
	rows, err := db.Query(ctx, `
		SELECT a.id, a.conversation_id, c.user_id, q.id, q.contents, a.contents,
		       EXISTS (SELECT 1 FROM alicia_sentences s WHERE s.message_id = a.id AND s.deleted_at IS NULL
		               AND s.playout_status IN ('played', 'interrupted')) AS spoken,
		       (EXISTS (SELECT 1 FROM alicia_votes v WHERE v.message_id = a.id AND v.deleted_at IS NULL)
		        OR EXISTS (SELECT 1 FROM alicia_notes n WHERE n.message_id = a.id AND n.deleted_at IS NULL)) AS remarked
		FROM alicia_messages a
		JOIN alicia_conversations c ON c.id = a.conversation_id AND c.deleted_at IS NULL
		JOIN alicia_messages q ON q.conversation_id = a.conversation_id AND q.id = a.previous_id
		WHERE a.message_role = 'assistant' AND q.message_role = 'user'
		  AND a.completion_status = 'completed' AND a.deleted_at IS NULL AND q.deleted_at IS NULL
		  AND c.user_id = ANY($1)
		ORDER BY remarked DESC, a.created_at DESC
		LIMIT $2`, s.UserIDs, limit)
	if err != nil {
		return nil, fmt.Errorf("optimize: load turns: %w", err)
	}
	type head struct {
		t        Turn
		cid, qid string
	}
	var heads []head
	for rows.Next() {
		var h head
		var remarked bool
		if err := rows.Scan(&h.t.MessageID, &h.cid, &h.t.UserID, &h.qid, &h.t.Question, &h.t.Answer, &h.t.Spoken, &remarked); err != nil {
			rows.Close()
			return nil, fmt.Errorf("optimize: load turns: %w", err)
		}
		heads = append(heads, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("optimize: load turns: %w", err)
	}
	out := make([]Turn, 0, len(heads))
	for _, h := range heads {
		t := h.t
		if t.History, err = history(ctx, db, h.cid, h.qid); err != nil {
			return nil, err
		}
		if t.Memories, err = strs(ctx, db, `SELECT m.content FROM alicia_memory_used u JOIN alicia_memory m ON m.id = u.memory_id
			WHERE u.message_id = $1 AND u.deleted_at IS NULL ORDER BY u.position_in_results NULLS LAST, u.created_at`, t.MessageID); err != nil {
			return nil, err
		}
		if t.Tools, err = toolCalls(ctx, db, t.MessageID); err != nil {
			return nil, err
		}
		if t.Feedback, t.Vote, err = remarks(ctx, db, t.MessageID); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// history is the branch before message id (excluded), oldest first, at
// most historyTurns messages.
func history(ctx context.Context, db Querier, cid, id string) ([]Message, error) {
	rows, err := db.Query(ctx, `
		WITH RECURSIVE up(id, previous_id, message_role, contents, depth) AS (
			SELECT m.id, m.previous_id, m.message_role, m.contents, 0 FROM alicia_messages m
			WHERE m.conversation_id = $1 AND m.id = $2
			UNION ALL
			SELECT m.id, m.previous_id, m.message_role, m.contents, up.depth + 1 FROM alicia_messages m
			JOIN up ON m.conversation_id = $1 AND m.id = up.previous_id
			WHERE up.depth < $3 AND m.deleted_at IS NULL)
		SELECT message_role::text, contents FROM up WHERE depth > 0 AND message_role IN ('user', 'assistant')
		ORDER BY depth DESC`, cid, id, historyTurns)
	if err != nil {
		return nil, fmt.Errorf("optimize: load history: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		if err := rows.Scan(&m.Role, &m.Content); err != nil {
			return nil, fmt.Errorf("optimize: load history: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func toolCalls(ctx context.Context, db Querier, id string) ([]ToolCall, error) {
	rows, err := db.Query(ctx, `SELECT tool_name, tool_arguments::text, coalesce(tool_result::text, '')
		FROM alicia_tool_uses WHERE message_id = $1 AND deleted_at IS NULL AND status = 'success'
		ORDER BY sequence_number, created_at`, id)
	if err != nil {
		return nil, fmt.Errorf("optimize: load tool uses: %w", err)
	}
	defer rows.Close()
	var out []ToolCall
	for rows.Next() {
		var c ToolCall
		if err := rows.Scan(&c.Name, &c.Arguments, &c.Result); err != nil {
			return nil, fmt.Errorf("optimize: load tool uses: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// remarks is what the person said about answer id — the reasons given with
// votes on it (or its parts), its notes — and their vote on the answer.
func remarks(ctx context.Context, db Querier, id string) ([]string, int, error) {
	rows, err := db.Query(ctx, `
		SELECT vote::text, target_type::text, coalesce(quick_feedback, ''), coalesce(note, '') FROM alicia_votes
		WHERE message_id = $1 AND deleted_at IS NULL ORDER BY created_at`, id)
	if err != nil {
		return nil, 0, fmt.Errorf("optimize: load votes: %w", err)
	}
	var said []string
	vote := 0
	for rows.Next() {
		var v, target, quick, note string
		if err := rows.Scan(&v, &target, &quick, &note); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("optimize: load votes: %w", err)
		}
		if target == "message" {
			vote = map[string]int{"up": 1, "down": -1, "critical": -1}[v]
		}
		for _, s := range []string{quick, note} {
			if s = strings.TrimSpace(s); s != "" {
				said = append(said, s)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("optimize: load votes: %w", err)
	}
	notes, err := strs(ctx, db, `SELECT content FROM alicia_notes WHERE message_id = $1 AND deleted_at IS NULL ORDER BY created_at`, id)
	if err != nil {
		return nil, 0, err
	}
	return append(said, notes...), vote, nil
}

func strs(ctx context.Context, db Querier, sql string, args ...any) ([]string, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("optimize: load: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("optimize: load: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

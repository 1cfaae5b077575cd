package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// JudgedTurn is what a judge reads of one answer: the question it answered,
// its text, and the tool results and memories it used.
type JudgedTurn struct {
	AnswerID, ConversationID string
	// Role of the answered message ("assistant" for the answer itself).
	Role        string
	Status      string // completion_status of the answer
	Interrupted bool
	// QuestionRole and Question: the message the answer follows ("" when
	// it has none).
	QuestionRole, Question string
	Answer                 string
	Tools                  []ToolUse
	Memories               []string
}

// ToolUse is one tool call of an answer, as stored.
type ToolUse struct {
	Name, Arguments, Result, Status, ErrorCode, ErrorMessage string
}

// JudgedTurn reads answer id with its question, tool uses and memories used.
func (r *Reader) JudgedTurn(ctx context.Context, id string) (JudgedTurn, error) {
	t := JudgedTurn{AnswerID: id}
	err := r.db.QueryRow(ctx, `SELECT m.conversation_id, m.message_role::text, m.completion_status::text, m.interrupted_at IS NOT NULL,
			COALESCE(p.message_role::text, ''), COALESCE(p.contents, ''), m.contents
		FROM alicia_messages m LEFT JOIN alicia_messages p ON p.id = m.previous_id AND p.deleted_at IS NULL
		WHERE m.id = $1 AND m.deleted_at IS NULL`, id).
		Scan(&t.ConversationID, &t.Role, &t.Status, &t.Interrupted, &t.QuestionRole, &t.Question, &t.Answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("store: judged turn: %w", err)
	}
	rows, err := r.db.Query(ctx, `SELECT tool_name, tool_arguments::text, COALESCE(tool_result::text, ''), status::text,
			COALESCE(error_code, ''), COALESCE(error_message, '')
		FROM alicia_tool_uses WHERE message_id = $1 AND deleted_at IS NULL ORDER BY sequence_number, created_at, id`, id)
	if err != nil {
		return t, fmt.Errorf("store: judged turn tools: %w", err)
	}
	t.Tools, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ToolUse, error) {
		var u ToolUse
		err := row.Scan(&u.Name, &u.Arguments, &u.Result, &u.Status, &u.ErrorCode, &u.ErrorMessage)
		return u, err
	})
	if err != nil {
		return t, fmt.Errorf("store: judged turn tools: %w", err)
	}
	rows, err = r.db.Query(ctx, `SELECT COALESCE(NULLIF(u.meta->>'content', ''), mem.content, '')
		FROM alicia_memory_used u LEFT JOIN alicia_memory mem ON mem.id = u.memory_id
		WHERE u.message_id = $1 AND u.deleted_at IS NULL ORDER BY u.position_in_results NULLS LAST, u.id`, id)
	if err != nil {
		return t, fmt.Errorf("store: judged turn memories: %w", err)
	}
	t.Memories, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return t, fmt.Errorf("store: judged turn memories: %w", err)
	}
	return t, nil
}

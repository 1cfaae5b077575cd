package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Turn is an answer and the message it answers.
type Turn struct {
	ConversationID string
	UserID         string // owner of the conversation
	AnswerID       string
	Answer         string
	AnswerStatus   string // completion_status: pending, streaming, completed, failed
	Interrupted    bool   // a ControlStop cut the answer
	PromptID       string // the message answered; "" when there is none
	PromptRole     string // user, assistant or system
	Prompt         string
}

// Turn returns the answer answerID and the message before it.
func (s *Store) Turn(ctx context.Context, answerID string) (Turn, error) {
	t := Turn{AnswerID: answerID}
	err := s.pool.QueryRow(ctx, `
		SELECT a.conversation_id, COALESCE(c.user_id, ''), a.contents, a.completion_status::text, a.interrupted_at IS NOT NULL,
			COALESCE(p.id, ''), COALESCE(p.message_role::text, ''), COALESCE(p.contents, '')
		FROM alicia_messages a
		JOIN alicia_conversations c ON c.id = a.conversation_id
		LEFT JOIN alicia_messages p ON p.id = a.previous_id AND p.deleted_at IS NULL
		WHERE a.id = $1 AND a.deleted_at IS NULL AND a.message_role = 'assistant'`, answerID).
		Scan(&t.ConversationID, &t.UserID, &t.Answer, &t.AnswerStatus, &t.Interrupted, &t.PromptID, &t.PromptRole, &t.Prompt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Turn{}, fmt.Errorf("answer %s: %w", answerID, ErrNotFound)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("store: turn %s: %w", answerID, err)
	}
	return t, nil
}

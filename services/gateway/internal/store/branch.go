package store

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Sentence is one stored sentence of an answer still streaming.
type Sentence = restapi.Sentence

// BranchThrough returns the branch of conversation cid that goes through
// message through: the messages from the root to it, then on from it
// along the newest reply at each step to a leaf, root first, with their
// details. ErrNotFound when through is not a message of cid.
func (s *Store) BranchThrough(ctx context.Context, cid, through string) ([]Message, error) {
	var leaf string
	err := s.pool.QueryRow(ctx, `
		WITH RECURSIVE down AS (
			SELECT m.id, 0 AS depth FROM alicia_messages m
			WHERE m.id = $2 AND m.conversation_id = $1 AND m.deleted_at IS NULL
			UNION ALL
			SELECT c.id, d.depth + 1 FROM down d
			CROSS JOIN LATERAL (
				SELECT n.id FROM alicia_messages n
				WHERE n.conversation_id = $1 AND n.previous_id = d.id AND n.deleted_at IS NULL
				ORDER BY n.created_at DESC, n.id DESC LIMIT 1
			) c
			WHERE d.depth < $3
		)
		SELECT id FROM down ORDER BY depth DESC LIMIT 1`, cid, through, maxBranch).Scan(&leaf)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: branch through: %w", err)
	}
	return s.branchBack(ctx, `SELECT m.id, m.previous_id, 1 AS depth FROM alicia_messages m
			WHERE m.id = $1 AND m.deleted_at IS NULL`, leaf)
}

// StreamingSentences reads the stored sentences of the answers in msgs
// that are still streaming, in order, so a client that resumes the
// conversation's envelopes after the snapshot continues them exactly.
func (s *Store) StreamingSentences(ctx context.Context, msgs []Message) error {
	var ids []string
	byID := map[string]*Message{}
	for i := range msgs {
		if msgs[i].Status == "streaming" || msgs[i].Status == "pending" {
			ids = append(ids, msgs[i].ID)
			byID[msgs[i].ID] = &msgs[i]
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT message_id, sentence_sequence_number, text FROM alicia_sentences
		WHERE message_id = ANY($1) AND deleted_at IS NULL ORDER BY message_id, sentence_sequence_number`, ids)
	if err != nil {
		return fmt.Errorf("store: sentences: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var st Sentence
		if err := rows.Scan(&id, &st.Sequence, &st.Text); err != nil {
			return fmt.Errorf("store: sentences: %w", err)
		}
		m := byID[id]
		m.Sentences = append(m.Sentences, st)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: sentences: %w", err)
	}
	return nil
}

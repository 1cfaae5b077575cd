package store

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// Message is one message with what the assistant did for it (Votes and
// NoteCount set by Feedback; Sentences those stored so far of an answer
// still streaming; Spoken, for an answer that was spoken, each sentence
// with what became of its audio). The REST API's shapes are generated from
// its contract (pkg/restapi, proto-schemas/rest/openapi.json).
type Message = restapi.Message

// SpokenSentence is one sentence of a spoken answer: played, interrupted
// (after PlayedMs), unplayed or pending.
type SpokenSentence = restapi.SpokenSentence

// ToolUse is one tool call of an answer, in call order.
type ToolUse = restapi.ToolUse

// MemoryUse is a memory the answer was given, in retrieval order; its ID
// is the use's (amu_…), the target id of a memory_usage vote.
type MemoryUse = restapi.MemoryUsed

// ReasoningStep is one step of the model's reasoning.
type ReasoningStep = restapi.ReasoningStep

// maxBranch bounds a branch walk (and guards against a cycle in previous_id).
const maxBranch = 10000

// messageColumns are read from m (alicia_messages); the sibling count
// includes the message itself. Counted by equality, not IS NOT DISTINCT
// FROM, so a reply's count is an index lookup (idx_messages_previous)
// instead of a scan of the conversation per message (which took 336 of
// the 343 ms of reading a branch of 2,000 messages).
const messageColumns = `m.id, m.previous_id, m.message_role::text, m.contents, m.completion_status::text,
	m.interrupted_at IS NOT NULL, m.sequence_number, m.created_at,
	CASE WHEN m.previous_id IS NULL
		THEN (SELECT count(*) FROM alicia_messages s WHERE s.conversation_id = m.conversation_id
			AND s.previous_id IS NULL AND s.deleted_at IS NULL)
		ELSE (SELECT count(*) FROM alicia_messages s WHERE s.previous_id = m.previous_id
			AND s.conversation_id = m.conversation_id AND s.deleted_at IS NULL)
	END`

func scanMessages(rows pgx.Rows) ([]Message, error) {
	defer rows.Close()
	out := []Message{}
	for rows.Next() {
		var m Message
		var at time.Time
		if err := rows.Scan(&m.ID, &m.PreviousID, &m.Role, &m.Content, &m.Status, &m.Interrupted,
			&m.SequenceNumber, &at, &m.SiblingCount); err != nil {
			return nil, err
		}
		m.CreatedAt = ms(at)
		out = append(out, m)
	}
	return out, rows.Err()
}

// Branch returns the messages on conversation cid's current branch (walking
// previous_id back from the branch head), root first, with their tool uses,
// memories used and reasoning steps.
func (s *Store) Branch(ctx context.Context, cid string) ([]Message, error) {
	return s.branchBack(ctx, `SELECT m.id, m.previous_id, 1 AS depth FROM alicia_messages m
			JOIN alicia_conversations c ON c.tip_message_id = m.id
			WHERE c.id = $1 AND m.deleted_at IS NULL`, cid)
}

// branchBack walks previous_id back from the message anchor selects (its
// id, previous id and depth 1, from $1) and returns the messages, root
// first, with their details.
func (s *Store) branchBack(ctx context.Context, anchor string, arg string) ([]Message, error) {
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE branch AS (
			`+anchor+`
			UNION ALL
			SELECT m.id, m.previous_id, b.depth + 1 FROM alicia_messages m JOIN branch b ON m.id = b.previous_id
			WHERE m.deleted_at IS NULL AND b.depth < $2
		)
		SELECT `+messageColumns+` FROM branch b JOIN alicia_messages m ON m.id = b.id ORDER BY b.depth DESC`, arg, maxBranch)
	if err != nil {
		return nil, fmt.Errorf("store: branch: %w", err)
	}
	msgs, err := scanMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("store: branch: %w", err)
	}
	if err := s.details(ctx, msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// Siblings returns the messages sharing message mid's parent (the roots of
// its conversation when it has none), oldest first, the parent, and which
// of them lies on the current branch ("" when none does).
func (s *Store) Siblings(ctx context.Context, mid string) (parent *string, sibs []Message, current string, err error) {
	var cid string
	err = s.pool.QueryRow(ctx, `SELECT conversation_id, previous_id FROM alicia_messages WHERE id = $1 AND deleted_at IS NULL`, mid).Scan(&cid, &parent)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, "", ErrNotFound
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("store: siblings: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM alicia_messages m
		WHERE m.conversation_id = $1 AND m.previous_id IS NOT DISTINCT FROM $2 AND m.deleted_at IS NULL
		ORDER BY m.created_at, m.id`, cid, parent)
	if err != nil {
		return nil, nil, "", fmt.Errorf("store: siblings: %w", err)
	}
	if sibs, err = scanMessages(rows); err != nil {
		return nil, nil, "", fmt.Errorf("store: siblings: %w", err)
	}
	if err := s.details(ctx, sibs); err != nil {
		return nil, nil, "", err
	}
	ids := make([]string, len(sibs))
	for i, m := range sibs {
		ids[i] = m.ID
	}
	// The sibling the branch head descends from.
	err = s.pool.QueryRow(ctx, `
		WITH RECURSIVE branch AS (
			SELECT m.id, m.previous_id, 1 AS depth FROM alicia_messages m
			JOIN alicia_conversations c ON c.tip_message_id = m.id WHERE c.id = $1
			UNION ALL
			SELECT m.id, m.previous_id, b.depth + 1 FROM alicia_messages m JOIN branch b ON m.id = b.previous_id
			WHERE b.depth < $3
		)
		SELECT id FROM branch WHERE id = ANY($2) LIMIT 1`, cid, ids, maxBranch).Scan(&current)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, "", fmt.Errorf("store: siblings: %w", err)
	}
	return parent, sibs, current, nil
}

// details attaches tool uses, memories used and reasoning steps to msgs.
func (s *Store) details(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	byID := make(map[string]*Message, len(msgs))
	for i := range msgs {
		ids[i] = msgs[i].ID
		byID[msgs[i].ID] = &msgs[i]
	}
	batch := &pgx.Batch{}
	// Rows are attached only when they are of the message's own
	// conversation, and a memory's content only when the memory is the
	// conversation owner's: persistence refuses anything else now, but
	// rows written before it did must not show another user's data.
	batch.Queue(`SELECT t.message_id, t.id, t.tool_name, t.tool_arguments, t.tool_result, t.status::text, t.error_code, t.error_message,
			t.processing_duration_ms
		FROM alicia_tool_uses t JOIN alicia_messages m ON m.id = t.message_id AND m.conversation_id = t.conversation_id
		WHERE t.message_id = ANY($1) AND t.deleted_at IS NULL
		ORDER BY t.message_id, t.sequence_number, t.created_at`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid string
			var u ToolUse
			if err := rows.Scan(&mid, &u.ID, &u.ToolName, &u.Arguments, &u.Result, &u.Status, &u.ErrorCode, &u.ErrorMessage, &u.DurationMs); err != nil {
				return err
			}
			byID[mid].ToolUses = append(byID[mid].ToolUses, u)
		}
		return rows.Err()
	})
	batch.Queue(`SELECT u.message_id, u.id, u.memory_id, CASE WHEN mem.id IS NOT NULL THEN mem.content ELSE COALESCE(u.meta->>'content', '') END,
			COALESCE(u.similarity_score, 0), COALESCE(u.query_prompt, ''), u.query_prompt_meta
		FROM alicia_memory_used u
		JOIN alicia_conversations c ON c.id = u.conversation_id
		JOIN alicia_messages m ON m.id = u.message_id AND m.conversation_id = u.conversation_id
		LEFT JOIN alicia_memory mem ON mem.id = u.memory_id AND mem.user_id IS NOT DISTINCT FROM c.user_id
		WHERE u.message_id = ANY($1) AND u.deleted_at IS NULL
		ORDER BY u.message_id, u.position_in_results NULLS LAST, u.created_at`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid string
			var u MemoryUse
			var queryMeta map[string]any
			if err := rows.Scan(&mid, &u.ID, &u.MemoryID, &u.Content, &u.Similarity, &u.QueryPrompt, &queryMeta); err != nil {
				return err
			}
			if len(queryMeta) > 0 {
				u.QueryPromptMeta = &queryMeta
			}
			byID[mid].MemoriesUsed = append(byID[mid].MemoriesUsed, u)
		}
		return rows.Err()
	})
	batch.Queue(`SELECT message_id, id, sequence_number, content FROM alicia_reasoning_steps
		WHERE message_id = ANY($1) AND deleted_at IS NULL ORDER BY message_id, sequence_number`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid string
			var r ReasoningStep
			if err := rows.Scan(&mid, &r.ID, &r.Sequence, &r.Content); err != nil {
				return err
			}
			byID[mid].Reasoning = append(byID[mid].Reasoning, r)
		}
		return rows.Err()
	})
	// The sentences of spoken answers: those with a playout reported.
	batch.Queue(`WITH voiced AS (
			SELECT DISTINCT message_id FROM alicia_sentences
			WHERE message_id = ANY($1) AND deleted_at IS NULL AND playout_status <> 'pending'
		)
		SELECT s.message_id, s.sentence_sequence_number, s.text, s.playout_status::text, COALESCE(s.played_ms, 0)
		FROM alicia_sentences s JOIN voiced v ON v.message_id = s.message_id
		WHERE s.deleted_at IS NULL ORDER BY s.message_id, s.sentence_sequence_number`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid string
			var sp SpokenSentence
			if err := rows.Scan(&mid, &sp.Sequence, &sp.Text, &sp.Playout, &sp.PlayedMs); err != nil {
				return err
			}
			byID[mid].Spoken = append(byID[mid].Spoken, sp)
		}
		return rows.Err()
	})
	// The prompt versions that produced each answer, in the order the llm
	// named them (a version no longer stored keeps its id).
	batch.Queue(`SELECT m.id, COALESCE(pv.component, ''), v.id, pv.version
		FROM alicia_messages m CROSS JOIN LATERAL unnest(m.prompt_versions) WITH ORDINALITY AS v(id, n)
		LEFT JOIN alicia_prompt_versions pv ON pv.id = v.id
		WHERE m.id = ANY($1) AND m.prompt_versions IS NOT NULL ORDER BY m.id, v.n`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid string
			var v restapi.MessagePromptVersion
			if err := rows.Scan(&mid, &v.Component, &v.ID, &v.Version); err != nil {
				return err
			}
			byID[mid].PromptVersions = append(byID[mid].PromptVersions, v)
		}
		return rows.Err()
	})
	// The judge's scores (of the message's own conversation).
	batch.Queue(`SELECT j.message_id, j.correctness, j.faithfulness, j.relevancy, j.rationale, j.judge_model
		FROM alicia_message_judgements j JOIN alicia_messages m ON m.id = j.message_id AND m.conversation_id = j.conversation_id
		WHERE j.message_id = ANY($1)`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid, model string
			var j restapi.Judgement
			var c, f, r float32
			if err := rows.Scan(&mid, &c, &f, &r, &j.Rationale, &model); err != nil {
				return err
			}
			j.Correctness, j.Faithfulness, j.Relevancy = round3(c), round3(f), round3(r)
			if model != "" {
				j.Model = &model
			}
			byID[mid].Judgement = &j
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("store: message details: %w", err)
	}
	return nil
}

// round3 is a stored real as the number it was written as (0.8, not
// 0.800000011920929).
func round3(v float32) float64 { return math.Round(float64(v)*1000) / 1000 }

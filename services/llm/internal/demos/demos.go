// Package demos chooses a turn's demonstrations: up to k earlier answered
// turns of the same person that they rated well (an up vote) or the judge
// scored high, never down-voted, most similar to the new message first.
// The turn engine shows them to the model as few-shot examples, introduced
// by the demonstrations prompt component (the seed's memory-aware
// learning). Only the person's own conversations are read: another
// person's answers never serve as someone's demonstrations.
package demos

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Querier runs read queries; a *pgxpool.Pool (read-only session) fits.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Demo is one demonstration: the person's question and the answer they
// rated well, both cut to the selector's bounds.
type Demo struct {
	AnswerID, ConversationID string
	Question, Answer         string
	// Rank is the text-search similarity to the new message (0: chosen by
	// score alone); Score the answer's score (1 for an up vote, else the
	// judge's mean).
	Rank, Score float64
}

// Query is what a turn asks for.
type Query struct {
	UserID         string // the person: only their conversations are read
	ConversationID string // the turn's conversation
	Text           string // the new user message
	// HistoryLimit messages of the conversation's current branch (from its
	// tip) are in the turn's history already, so never demonstrations.
	HistoryLimit int
}

// Selector reads demonstrations from Postgres.
type Selector struct {
	DB Querier
	// K is how many at most (0: none, Select does not query).
	K int
	// MinScore is the judge's mean (correctness, faithfulness, relevancy)
	// at or above which a turn without an up vote qualifies.
	MinScore float64
	// MaxQuestion and MaxAnswer bound each demonstration's texts in
	// characters (longer ones are cut at a word, with an ellipsis).
	MaxQuestion, MaxAnswer int
	// Pool bounds the person's qualifying turns considered, the most
	// recent ones (the similarity is computed on them, without an index).
	Pool int
}

// Defaults of a Selector's bounds.
const (
	DefaultMinScore    = 0.8
	DefaultMaxQuestion = 300
	DefaultMaxAnswer   = 600
	DefaultPool        = 500
)

// New returns a selector of up to k demonstrations with the default bounds.
func New(db Querier, k int) *Selector {
	return &Selector{DB: db, K: k, MinScore: DefaultMinScore, MaxQuestion: DefaultMaxQuestion, MaxAnswer: DefaultMaxAnswer, Pool: DefaultPool}
}

// selectSQL: the person's (c.user_id = $1) completed, uninterrupted answers
// to their own question, up-voted or judged at least $5 on the mean, with no
// down vote on the answer or any of its parts, outside the current branch
// of conversation $2; the most recent $6 of them ranked by ts_rank against
// $3 (an OR of the new message's words: any shared word counts), then by
// score, then recency. A message sharing no word ranks 0: the person's best
// turns still show the manner they like.
const selectSQL = `
WITH RECURSIVE branch(id, previous_id, depth) AS (
	SELECT m.id, m.previous_id, 1 FROM alicia_conversations c
	JOIN alicia_messages m ON m.conversation_id = c.id AND m.id = c.tip_message_id
	WHERE c.id = $2
	UNION ALL
	SELECT m.id, m.previous_id, b.depth + 1 FROM alicia_messages m
	JOIN branch b ON m.conversation_id = $2 AND m.id = b.previous_id
	WHERE b.depth < $7
),
pool AS (
	SELECT a.id, a.conversation_id, q.contents AS question, a.contents AS answer, a.created_at,
	       GREATEST(CASE WHEN up.id IS NULL THEN 0 ELSE 1 END,
	                COALESCE((j.correctness + j.faithfulness + j.relevancy) / 3.0, 0)) AS score
	FROM alicia_messages a
	JOIN alicia_conversations c ON c.id = a.conversation_id AND c.deleted_at IS NULL
	JOIN alicia_messages q ON q.conversation_id = a.conversation_id AND q.id = a.previous_id
	LEFT JOIN alicia_votes up ON up.message_id = a.id AND up.target_type = 'message' AND up.target_id = a.id
		AND up.vote = 'up' AND up.deleted_at IS NULL
	LEFT JOIN alicia_message_judgements j ON j.message_id = a.id
	WHERE c.user_id = $1
	  AND a.message_role = 'assistant' AND a.completion_status = 'completed'
	  AND a.interrupted_at IS NULL AND a.deleted_at IS NULL AND btrim(a.contents) <> ''
	  AND q.message_role = 'user' AND q.deleted_at IS NULL AND btrim(q.contents) <> ''
	  AND (up.id IS NOT NULL OR (j.correctness + j.faithfulness + j.relevancy) / 3.0 >= $5)
	  AND NOT EXISTS (SELECT 1 FROM alicia_votes d WHERE d.message_id = a.id
		AND d.vote IN ('down', 'critical') AND d.deleted_at IS NULL)
	  AND NOT EXISTS (SELECT 1 FROM branch b WHERE b.id IN (a.id, q.id))
	ORDER BY a.created_at DESC
	LIMIT $6
)
SELECT id, conversation_id, question, answer, score::float8,
       ts_rank(to_tsvector('english', question), websearch_to_tsquery('english', $3))::float8 AS rank
FROM pool
ORDER BY rank DESC, score DESC, created_at DESC
LIMIT $4`

// Select returns up to K demonstrations for q (none when K is 0, the
// person is unknown or the text empty).
func (s *Selector) Select(ctx context.Context, q Query) ([]Demo, error) {
	if s == nil || s.K <= 0 || q.UserID == "" || strings.TrimSpace(q.Text) == "" {
		return nil, nil
	}
	rows, err := s.DB.Query(ctx, selectSQL, q.UserID, q.ConversationID, anyWord(q.Text), s.K, s.MinScore, max(s.Pool, s.K),
		max(q.HistoryLimit, 1))
	if err != nil {
		return nil, fmt.Errorf("demos: select: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Demo, error) {
		var d Demo
		err := row.Scan(&d.AnswerID, &d.ConversationID, &d.Question, &d.Answer, &d.Score, &d.Rank)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("demos: select: %w", err)
	}
	for i := range out {
		out[i].Question = Cut(out[i].Question, s.MaxQuestion)
		out[i].Answer = Cut(out[i].Answer, s.MaxAnswer)
	}
	return out, nil
}

// anyWord is text as a web-search query matching any of its words: the
// words (letters and digits only, so no operator of the syntax survives)
// joined by "or". It is a parameter's value, never SQL.
func anyWord(text string) string {
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	kept := words[:0]
	for _, w := range words {
		if !strings.EqualFold(w, "or") {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " or ")
}

// Cut returns s with at most n characters: when longer, cut at the last
// space before the bound (or at it) and ended with an ellipsis. n <= 0
// leaves s whole.
func Cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:max(n-1, 0)]
	cut := string(r)
	if i := strings.LastIndexFunc(cut, unicode.IsSpace); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRightFunc(cut, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) + "…"
}

// Package judge scores answers after they end, off the turn path: for a
// sampled share of answers it reads the question, the answer and the tool
// results and memories it used (Postgres, once persistence has applied the
// answer's end), asks a judge model for correctness, faithfulness and
// relevancy in [0, 1] with a one-sentence rationale (JSON output), and
// publishes a TurnJudgement on the conversation's agent subject, which
// persistence stores. See the llm's README ("Judged turns").
package judge

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
)

// Turns reads an answer to judge (*store.Reader).
type Turns interface {
	JudgedTurn(ctx context.Context, id string) (store.JudgedTurn, error)
}

// Model is the judge model (*Client).
type Model interface {
	Complete(ctx context.Context, p Prompt) (Reply, error)
	Model() string
}

// Publisher publishes on a conversation's agent subject (*bus.Publisher).
type Publisher interface {
	PublishAgent(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error)
}

// Outcomes counted in alicia_llm_judged_total.
const (
	OutcomeJudged      = "judged"
	OutcomeUnsampled   = "unsampled"
	OutcomeSkipped     = "skipped"
	OutcomeMalformed   = "malformed"
	OutcomeRejected    = "rejected"
	OutcomeUnavailable = "unavailable"
)

// Judge is the use case: one answer judged.
type Judge struct {
	Turns     Turns
	Model     Model
	Publisher Publisher
	// Applied waits until persistence has applied CONVERSATIONS up to seq.
	Applied func(ctx context.Context, seq uint64) error
	Metrics *metrics.Metrics
	Log     zerolog.Logger
	// Sample is the share of answers judged, 0..1 (ALICIA_JUDGE_SAMPLE).
	Sample float64
}

// MsgID is the Nats-Msg-Id of an answer's judgement: a redelivered answer
// end judged again publishes nothing new.
func MsgID(answerID string) string { return answerID + ":judge" }

// Sampled says whether answer id is among the judged share: a pure function
// of the id, so a redelivery decides the same way.
func Sampled(id string, share float64) bool {
	if share <= 0 {
		return false
	}
	// SHA-256, not FNV: ids differ only in a few characters, and FNV's
	// high bits of such ids are far from uniform.
	h := sha256.Sum256([]byte(id))
	return float64(binary.BigEndian.Uint64(h[:8]))/math.Exp2(64) < share
}

// Answer judges answer id, whose end was stored at CONVERSATIONS sequence
// seq. An error is worth retrying later (persistence, Postgres, the judge
// backend or JetStream unavailable); what retrying cannot help — an answer
// not to be judged, a malformed reply given twice, a rejected request — is
// counted and ends with nil.
func (j *Judge) Answer(ctx context.Context, id string, seq uint64) error {
	if !Sampled(id, j.Sample) {
		j.count(OutcomeUnsampled)
		return nil
	}
	log := j.Log.With().Str("answer_id", id).Logger()
	if err := j.Applied(ctx, seq); err != nil {
		return fmt.Errorf("judge: wait for persistence: %w", err)
	}
	t, err := j.Turns.JudgedTurn(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		log.Debug().Msg("answer not stored; not judged")
		j.count(OutcomeSkipped)
		return nil
	}
	if err != nil {
		return err
	}
	log = log.With().Str("conversation_id", t.ConversationID).Logger()
	if t.Role != "assistant" || t.Status != "completed" || t.Interrupted || t.QuestionRole != "user" || t.Question == "" || t.Answer == "" {
		log.Debug().Str("status", t.Status).Bool("interrupted", t.Interrupted).Msg("failed, interrupted or no question; not judged")
		j.count(OutcomeSkipped)
		return nil
	}
	s, err := j.score(ctx, PromptFor(t))
	switch {
	case errors.Is(err, ErrMalformed):
		log.Warn().Err(err).Msg("judge reply malformed twice; answer not judged")
		j.count(OutcomeMalformed)
		return nil
	case errors.Is(err, ErrRejected):
		log.Error().Err(err).Msg("the judge backend rejected the request; answer not judged")
		j.count(OutcomeRejected)
		return nil
	case err != nil:
		return err
	}
	env := protocol.New(t.ConversationID, &protocol.TurnJudgement{
		ConversationID: t.ConversationID, MessageID: id, Correctness: s.Correctness, Faithfulness: s.Faithfulness,
		Relevancy: s.Relevancy, Rationale: s.Rationale, JudgeModel: j.Model.Model(), CreatedAt: time.Now().UnixMilli(),
	})
	if _, err := j.Publisher.PublishAgent(ctx, env, MsgID(id)); err != nil {
		return fmt.Errorf("judge: publish TurnJudgement: %w", err)
	}
	j.count(OutcomeJudged)
	log.Debug().Float64("correctness", s.Correctness).Float64("faithfulness", s.Faithfulness).Float64("relevancy", s.Relevancy).Msg("answer judged")
	return nil
}

// score asks the judge model, once more when the first reply is malformed.
func (j *Judge) score(ctx context.Context, p Prompt) (Scores, error) {
	var err error
	for range 2 {
		start := time.Now()
		var r Reply
		r, err = j.Model.Complete(ctx, p)
		if j.Metrics != nil {
			j.Metrics.JudgeDuration.Observe(time.Since(start).Seconds())
			j.Metrics.JudgeTokens.WithLabelValues("prompt").Add(float64(r.PromptTokens))
			j.Metrics.JudgeTokens.WithLabelValues("completion").Add(float64(r.Completion))
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			return Scores{}, err
		}
		if err == nil {
			var s Scores
			if s, err = ParseScores(r.Content); err == nil {
				return s, nil
			}
		}
	}
	return Scores{}, err
}

// GiveUp counts an answer whose every delivery failed (the judge backend or
// a dependency was down throughout): it is dropped, not dead-lettered.
func (j *Judge) GiveUp(id string, err error) {
	j.Log.Warn().Err(err).Str("answer_id", id).Msg("judge: giving up on the answer after its last delivery")
	j.count(OutcomeUnavailable)
}

func (j *Judge) count(outcome string) {
	if j.Metrics != nil {
		j.Metrics.Judged.WithLabelValues(outcome).Inc()
	}
}

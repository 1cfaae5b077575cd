package store

import (
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// judgement stores the judge's scores of one answer (migration 00011): one
// row per answer, upserted, so a redelivered or repeated TurnJudgement never
// makes a second row; a judgement of a message that is not an answer of cid
// (or not stored) writes nothing. The conversation's correctness,
// faithfulness and relevancy become the means over its judged answers, in
// the same transaction.
func (w *writer) judgement(cid string, b *protocol.TurnJudgement, at time.Time) string {
	judged := at
	if b.CreatedAt > 0 {
		judged = time.UnixMilli(b.CreatedAt).UTC()
	}
	w.q(`INSERT INTO alicia_message_judgements (message_id, conversation_id, correctness, faithfulness, relevancy,
			rationale, judge_model, trace_id, judged_at, created_at, updated_at)
		SELECT m.id, m.conversation_id, $3, $4, $5, $6, $7, $8, $9, $10, $10
		FROM alicia_messages m WHERE m.id = $1 AND m.conversation_id = $2 AND m.message_role = 'assistant'
		ON CONFLICT (message_id) DO UPDATE SET correctness = EXCLUDED.correctness, faithfulness = EXCLUDED.faithfulness,
			relevancy = EXCLUDED.relevancy, rationale = EXCLUDED.rationale, judge_model = EXCLUDED.judge_model,
			trace_id = EXCLUDED.trace_id, judged_at = EXCLUDED.judged_at
		WHERE (alicia_message_judgements.correctness, alicia_message_judgements.faithfulness, alicia_message_judgements.relevancy,
				alicia_message_judgements.rationale, alicia_message_judgements.judge_model, alicia_message_judgements.judged_at)
			IS DISTINCT FROM (EXCLUDED.correctness, EXCLUDED.faithfulness, EXCLUDED.relevancy,
				EXCLUDED.rationale, EXCLUDED.judge_model, EXCLUDED.judged_at)`,
		b.MessageID, cid, unit(b.Correctness), unit(b.Faithfulness), unit(b.Relevancy), b.Rationale, b.JudgeModel, w.trace, judged, at)
	w.q(`UPDATE alicia_conversations c SET correctness = s.correctness, faithfulness = s.faithfulness, relevancy = s.relevancy
		FROM (SELECT avg(correctness)::double precision AS correctness, avg(faithfulness)::double precision AS faithfulness,
				avg(relevancy)::double precision AS relevancy
			FROM alicia_message_judgements WHERE conversation_id = $1 HAVING count(*) > 0) s
		WHERE c.id = $1 AND (c.correctness, c.faithfulness, c.relevancy) IS DISTINCT FROM (s.correctness, s.faithfulness, s.relevancy)`, cid)
	return b.MessageID
}

// unit keeps a score within the columns' CHECK: the judge clamps already; a
// value outside [0, 1] from elsewhere is clamped rather than failing the batch.
func unit(v float64) float32 {
	switch {
	case v != v: // NaN
		return 0
	case v < 0:
		return 0
	case v > 1:
		return 1
	}
	return float32(v)
}

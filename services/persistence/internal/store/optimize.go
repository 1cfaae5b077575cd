package store

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// The prompt optimiser's records (issue 29; migrations 00012, 00013), all
// internal envelopes of the SYSTEM stream, which persistence applies in
// stream order (one partition):
//
//   - OptimizationRun (alicia.sys.optimization_run) creates a queued run.
//   - EliteOptions (alicia.sys.elite_options), the optimiser's reports and
//     the gateway's cancel of a queued run, move the run forward only:
//     queued → running → done | failed | cancelled; once terminal, a run and
//     its candidates never change again (a late running report does not
//     revive a cancelled run, a late report's elites are not stored). A
//     report older than the stored progress (a lower iteration) changes
//     neither the progress nor the candidates. Its elites become the run's
//     candidates (on_front true; the run's earlier-front candidates a later
//     report no longer lists, false) and their per-example evaluations.
//   - DimensionPreference (alicia.sys.dimension_preference) is kept as a
//     row; the latest of a scope holds.
//   - EliteSelect (alicia.sys.elite_select) records the promotion on the
//     candidate: who, when, and the versions made from it.
//   - LearningConsent (alicia.sys.learning_consent): a person's latest choice.
//
// The acting person is the envelope's meta alicia.user_id (MetaUserID), set
// by the gateway; the versions an EliteSelect promoted are its meta
// alicia.prompt_version_ids (MetaPromptVersionIDs), comma-separated.

// MetaPromptVersionIDs names, in an EliteSelect's meta, the ids of the
// PromptVersions the promotion made (comma-separated), published before it.
const MetaPromptVersionIDs = "alicia.prompt_version_ids"

// missingMarker starts the text a statement fails with when an envelope
// names a run or candidate that was never stored (see markedFailure).
const missingMarker = "alicia-unknown: "

// runLive is the SQL condition that run r still takes reports.
const runLive = `r.status IN ('queued', 'running')`

// runFresh adds that the report's iteration ($2) is not older than r's stored progress.
const runFresh = runLive + ` AND COALESCE((r.progress->>'iteration')::int, 0) <= $2::int`

// defaultComponents are what a run without components rewrites.
var defaultComponents = []string{"system", "voice_style"}

func (w *writer) optimizationRun(b *protocol.OptimizationRun, at time.Time) (string, error) {
	switch b.Scope {
	case protocol.OptimizationRunScopeUser:
		if b.UserID == "" {
			return "", fmt.Errorf("%w: run %s of scope user without its userId", errOptimization, b.ID)
		}
	case protocol.OptimizationRunScopeInstallation:
	default:
		return "", fmt.Errorf("%w: run %s scope %q (use user or installation)", errOptimization, b.ID, b.Scope)
	}
	if b.ID == "" {
		return "", fmt.Errorf("%w: run without an id", errOptimization)
	}
	if b.Budget <= 0 {
		return "", fmt.Errorf("%w: run %s budget %d (at least 1 metric call)", errOptimization, b.ID, b.Budget)
	}
	components := b.Components
	if len(components) == 0 {
		components = defaultComponents
	}
	for _, c := range components {
		if !strings.HasPrefix(c, "tool:") && !validComponent[c] || c == "tool:" {
			return "", fmt.Errorf("%w: run %s component %q", errOptimization, b.ID, c)
		}
	}
	weights, err := unitWeights(b.Weights)
	if err != nil {
		return "", fmt.Errorf("%w: run %s %w", errOptimization, b.ID, err)
	}
	// Whose conversations an installation-wide run learns from, kept for
	// the record (who may have been read) beside its progress.
	progress := []byte("{}")
	if len(b.LearnFrom) > 0 {
		progress, _ = json.Marshal(map[string]any{"learnFrom": b.LearnFrom})
	}
	created := at
	if b.CreatedAt > 0 {
		created = time.UnixMilli(b.CreatedAt).UTC()
	}
	var user *string
	if b.UserID != "" {
		user = &b.UserID
	}
	w.q(`INSERT INTO prompt_optimization_runs (id, scope, user_id, components, budget, weights, status, progress, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $8) ON CONFLICT (id) DO NOTHING`,
		b.ID, string(b.Scope), user, components, b.Budget, weights, progress, created)
	return b.ID, nil
}

// unitWeights encodes dimension weights, each a finite 0..1 (absent: '{}', equal).
func unitWeights(weights map[string]float64) ([]byte, error) {
	for d, v := range weights {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return nil, fmt.Errorf("weight %s = %g outside 0..1", d, v)
		}
	}
	if weights == nil {
		weights = map[string]float64{}
	}
	return json.Marshal(weights)
}

var reportStatus = map[protocol.EliteOptionsStatus]bool{
	protocol.EliteOptionsStatusRunning: true, protocol.EliteOptionsStatusDone: true,
	protocol.EliteOptionsStatusFailed: true, protocol.EliteOptionsStatusCancelled: true,
}

// eliteOptions applies a run's report. A report of a run never stored is
// dead-lettered (unknown run): SYSTEM is applied in stream order and the
// gateway publishes the run before any optimiser can report on it, so it is
// not early, it is wrong.
func (w *writer) eliteOptions(b *protocol.EliteOptions, at time.Time) (string, error) {
	if !reportStatus[b.Status] {
		return "", fmt.Errorf("%w: report of run %s status %q (use running, done, failed or cancelled)", errOptimization, b.RunID, b.Status)
	}
	if b.Iteration < 0 || b.MetricCalls < 0 || b.FrontSize < 0 {
		return "", fmt.Errorf("%w: report of run %s with a negative count", errOptimization, b.RunID)
	}
	best := map[string]float64(b.BestScores)
	if best == nil {
		best = map[string]float64{}
	}
	progress, err := json.Marshal(map[string]any{"iteration": b.Iteration, "metricCalls": b.MetricCalls, "frontSize": b.FrontSize, "bestScores": best})
	if err != nil {
		return "", fmt.Errorf("%w: report of run %s best scores: %w", errOptimization, b.RunID, err)
	}
	els, err := newEliteRows(b.Elites)
	if err != nil {
		return "", fmt.Errorf("%w: report of run %s: %w", errOptimization, b.RunID, err)
	}
	// The failing text is built from unnest's rows, not from constants
	// alone: the planner would fold a constant cast and fail every time.
	w.q(`SELECT ('`+missingMarker+`' || 'optimisation run ' || x.id)::int FROM unnest(ARRAY[$1::text]) AS x(id)
		WHERE NOT EXISTS (SELECT 1 FROM prompt_optimization_runs r WHERE r.id = x.id)`, b.RunID)
	if len(els.ids) > 0 {
		// A candidate id of another run keeps that run's row (ids are
		// the optimiser's, derived from the texts).
		w.q(`INSERT INTO prompt_candidates AS c (id, run_id, components, scores, score, best_on, examples, on_front, created_at)
			SELECT x.id, r.id, x.comp::jsonb, x.sc::jsonb, x.w, x.b, x.ex::jsonb, true, $9
			FROM prompt_optimization_runs r,
				unnest($3::text[], $4::text[], $5::text[], $6::real[], $7::int[], $8::text[]) AS x(id, comp, sc, w, b, ex)
			WHERE r.id = $1 AND `+runFresh+`
			ON CONFLICT (id) DO UPDATE SET scores = EXCLUDED.scores, score = EXCLUDED.score, best_on = EXCLUDED.best_on,
				examples = COALESCE(EXCLUDED.examples, c.examples), on_front = true
			WHERE c.run_id = EXCLUDED.run_id AND (c.scores, c.score, c.best_on, c.examples, c.on_front)
				IS DISTINCT FROM (EXCLUDED.scores, EXCLUDED.score, EXCLUDED.best_on, COALESCE(EXCLUDED.examples, c.examples), true)`,
			b.RunID, b.Iteration, els.ids, els.components, els.scores, els.weighted, els.bestOn, els.examples, at)
		// The front is the latest report's elites (a report without
		// elites lists no front and leaves it).
		w.q(`UPDATE prompt_candidates c SET on_front = false FROM prompt_optimization_runs r
			WHERE r.id = $1 AND `+runFresh+` AND c.run_id = r.id AND c.on_front AND c.id <> ALL($3::text[])`,
			b.RunID, b.Iteration, els.ids)
	}
	if len(els.evalIDs) > 0 {
		w.q(`INSERT INTO prompt_evaluations AS e (id, candidate_id, message_id, scores, answer, created_at)
			SELECT x.id, x.cand, x.msg, x.sc::jsonb, x.ans, $8
			FROM prompt_optimization_runs r,
				unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS x(id, cand, msg, sc, ans)
			WHERE r.id = $1 AND `+runFresh+`
				AND EXISTS (SELECT 1 FROM prompt_candidates c WHERE c.id = x.cand AND c.run_id = r.id)
			ON CONFLICT (candidate_id, message_id) DO UPDATE SET scores = EXCLUDED.scores, answer = EXCLUDED.answer
			WHERE (e.scores, e.answer) IS DISTINCT FROM (EXCLUDED.scores, EXCLUDED.answer)`,
			b.RunID, b.Iteration, els.evalIDs, els.evalCands, els.evalMsgs, els.evalScores, els.evalAnswers, at)
	}
	// Forward only: the row is touched while queued or running; the
	// progress only by a report not older than it.
	w.q(`UPDATE prompt_optimization_runs r SET status = n.status, progress = n.progress, error = n.error,
			started_at = n.started_at, finished_at = n.finished_at
		FROM (SELECT r.id, $3::text AS status,
				CASE WHEN COALESCE((r.progress->>'iteration')::int, 0) <= $2::int THEN r.progress || $4::jsonb ELSE r.progress END AS progress,
				COALESCE($5::text, r.error) AS error,
				CASE WHEN $3::text IN ('running', 'done') THEN COALESCE(r.started_at, $6::timestamptz) ELSE r.started_at END AS started_at,
				CASE WHEN $3::text IN ('done', 'failed', 'cancelled') THEN $6::timestamptz END AS finished_at
			FROM prompt_optimization_runs r WHERE r.id = $1 AND `+runLive+`) n
		WHERE r.id = n.id AND (r.status, r.progress, r.error, r.started_at, r.finished_at)
			IS DISTINCT FROM (n.status, n.progress, n.error, n.started_at, n.finished_at)`,
		b.RunID, b.Iteration, string(b.Status), progress, b.Error, at)
	return "", nil
}

// eliteRows are a report's elites and evaluations as columns. An elite
// listed twice keeps its first listing, an evaluation of the same example
// its last (one statement cannot upsert a row twice).
type eliteRows struct {
	ids, components, scores                               []string
	examples                                              []*string
	weighted                                              []*float32
	bestOn                                                []*int32
	evalIDs, evalCands, evalMsgs, evalScores, evalAnswers []string
}

func newEliteRows(elites []protocol.Elite) (eliteRows, error) {
	var r eliteRows
	seen := map[string]bool{}
	for _, e := range elites {
		if e.CandidateID == "" {
			return r, fmt.Errorf("an elite without a candidateId")
		}
		if seen[e.CandidateID] {
			continue
		}
		seen[e.CandidateID] = true
		comp, err := jsonObject(e.Components)
		if err != nil {
			return r, fmt.Errorf("elite %s components: %w", e.CandidateID, err)
		}
		sc, err := jsonObject(e.Scores)
		if err != nil {
			return r, fmt.Errorf("elite %s scores: %w", e.CandidateID, err)
		}
		var ex *string
		if e.Examples != nil {
			b, err := json.Marshal(e.Examples)
			if err != nil {
				return r, fmt.Errorf("elite %s examples: %w", e.CandidateID, err)
			}
			s := string(b)
			ex = &s
		}
		var weighted *float32
		if e.Weighted != nil {
			if math.IsNaN(*e.Weighted) || math.IsInf(*e.Weighted, 0) {
				return r, fmt.Errorf("elite %s weighted score %g", e.CandidateID, *e.Weighted)
			}
			weighted = new(float32(*e.Weighted))
		}
		r.ids, r.components, r.scores = append(r.ids, e.CandidateID), append(r.components, comp), append(r.scores, sc)
		r.examples, r.weighted, r.bestOn = append(r.examples, ex), append(r.weighted, weighted), append(r.bestOn, e.BestOn)
		at := map[string]int{}
		for _, ev := range e.Evaluations {
			if ev.MessageID == "" {
				return r, fmt.Errorf("elite %s: an evaluation without a messageId", e.CandidateID)
			}
			sc, err := jsonObject(ev.Scores)
			if err != nil {
				return r, fmt.Errorf("elite %s evaluation of %s: %w", e.CandidateID, ev.MessageID, err)
			}
			if i, ok := at[ev.MessageID]; ok {
				r.evalScores[i], r.evalAnswers[i] = sc, deref(ev.Answer)
				continue
			}
			at[ev.MessageID] = len(r.evalIDs)
			r.evalIDs = append(r.evalIDs, evaluationID(e.CandidateID, ev.MessageID))
			r.evalCands, r.evalMsgs = append(r.evalCands, e.CandidateID), append(r.evalMsgs, ev.MessageID)
			r.evalScores, r.evalAnswers = append(r.evalScores, sc), append(r.evalAnswers, deref(ev.Answer))
		}
	}
	return r, nil
}

// evaluationID is the id of a candidate's evaluation on one example, the
// same on every redelivery.
func evaluationID(candidate, message string) string { return derivedID("pe", candidate, message) }

// jsonObject encodes a map as a JSON object (nil: {}).
func jsonObject[M ~map[string]V, V any](m M) (string, error) {
	if m == nil {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// actingUser is the person an internal envelope acts for (meta alicia.user_id).
func actingUser(env *protocol.Envelope) string {
	u, _ := env.Meta[MetaUserID].(string)
	return u
}

func (w *writer) dimensionPreference(env *protocol.Envelope, b *protocol.DimensionPreference, at time.Time) (string, error) {
	if b.Scope != protocol.DimensionPreferenceScopeUser && b.Scope != protocol.DimensionPreferenceScopeInstallation {
		return "", fmt.Errorf("%w: dimension preference %s scope %q (use user or installation)", errOptimization, b.ID, b.Scope)
	}
	user := actingUser(env)
	if user == "" || b.ID == "" {
		return "", fmt.Errorf("%w: dimension preference %q without meta %s (who set it) or an id", errOptimization, b.ID, MetaUserID)
	}
	var weights map[string]float64
	raw, err := json.Marshal(b.Weights)
	if err == nil {
		err = json.Unmarshal(raw, &weights)
	}
	if err == nil {
		raw, err = unitWeights(weights)
	}
	if err != nil {
		return "", fmt.Errorf("%w: dimension preference %s %w", errOptimization, b.ID, err)
	}
	created := at
	if b.Timestamp > 0 {
		created = time.UnixMilli(b.Timestamp).UTC()
	}
	w.q(`INSERT INTO alicia_dimension_preferences (id, scope, user_id, weights, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING`, b.ID, string(b.Scope), user, raw, created)
	return b.ID, nil
}

// eliteSelect records a promotion on its candidate: who (meta
// alicia.user_id), when, the selection id and the versions made from it
// (meta alicia.prompt_version_ids). A candidate is promoted once: a later
// selection of it keeps the first record. The versions are published
// before the selection and applied first; when one of them was not stored
// (its version number was taken meanwhile: the gateway answers "promote
// again"), the selection is not recorded, so the candidate can be promoted
// again. A selection of a candidate the run does not have is dead-lettered.
func (w *writer) eliteSelect(env *protocol.Envelope, b *protocol.EliteSelect, at time.Time) (string, error) {
	user := actingUser(env)
	if user == "" || b.ID == "" {
		return "", fmt.Errorf("%w: elite selection %q without meta %s (who promoted it) or an id", errOptimization, b.ID, MetaUserID)
	}
	raw, _ := env.Meta[MetaPromptVersionIDs].(string)
	var versions []string
	for _, v := range strings.Split(raw, ",") {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(versions, v) {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("%w: elite selection %s without meta %s (the versions promoted)", errOptimization, b.ID, MetaPromptVersionIDs)
	}
	selected := at
	if b.Timestamp > 0 {
		selected = time.UnixMilli(b.Timestamp).UTC()
	}
	w.q(`SELECT ('`+missingMarker+`' || 'candidate ' || x.c || ' of optimisation run ' || x.r)::int
		FROM unnest(ARRAY[$1::text], ARRAY[$2::text]) AS x(r, c)
		WHERE NOT EXISTS (SELECT 1 FROM prompt_candidates p WHERE p.id = x.c AND p.run_id = x.r)`, b.RunID, b.CandidateID)
	w.q(`UPDATE prompt_candidates c SET selection_id = $3, selected_by = $4, selected_at = $5, prompt_version_ids = $6
		WHERE c.id = $2 AND c.run_id = $1 AND c.selected_at IS NULL
			AND (SELECT count(*) FROM alicia_prompt_versions v WHERE v.id = ANY($6::text[])) = cardinality($6::text[])`,
		b.RunID, b.CandidateID, b.ID, user, selected, versions)
	return b.ID, nil
}

// learningConsent keeps a person's latest choice: an older one (by its
// timestamp) replayed after a newer one changes nothing. Only the person
// may choose: meta alicia.user_id must be the body's userId.
func (w *writer) learningConsent(env *protocol.Envelope, b *protocol.LearningConsent, at time.Time) (string, error) {
	if b.UserID == "" || actingUser(env) != b.UserID {
		return "", fmt.Errorf("%w: learning consent of %q set by %q (meta %s): only the person may choose", errOptimization, b.UserID, actingUser(env), MetaUserID)
	}
	chosen := at
	if b.Timestamp > 0 {
		chosen = time.UnixMilli(b.Timestamp).UTC()
	}
	w.q(`INSERT INTO alicia_learning_consents AS l (user_id, share, chosen_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (user_id) DO UPDATE SET share = EXCLUDED.share, chosen_at = EXCLUDED.chosen_at
		WHERE EXCLUDED.chosen_at >= l.chosen_at AND (l.share, l.chosen_at) IS DISTINCT FROM (EXCLUDED.share, EXCLUDED.chosen_at)`,
		b.UserID, b.Share, chosen, at)
	return "", nil
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/restapi"
)

// OptimizationRun is a prompt optimisation run as the REST API shows it.
type OptimizationRun = restapi.OptimizationRun

// Elite is one of a run's candidates as the REST API shows it.
type Elite = restapi.Elite

// runColumns are read from r (prompt_optimization_runs).
const runColumns = `r.id, r.scope, r.user_id, r.components, r.budget, r.weights, r.status, r.progress, r.error,
	r.created_at, r.started_at, r.finished_at`

// runProgress is prompt_optimization_runs.progress.
type runProgress struct {
	Iteration   int32              `json:"iteration"`
	MetricCalls int32              `json:"metricCalls"`
	FrontSize   int32              `json:"frontSize"`
	BestScores  map[string]float64 `json:"bestScores"`
}

func scanRun(row pgx.Row) (OptimizationRun, error) {
	var r OptimizationRun
	var weights, progress []byte
	var created time.Time
	var started, finished *time.Time
	if err := row.Scan(&r.ID, &r.Scope, &r.UserID, &r.Components, &r.Budget, &weights, &r.Status, &progress, &r.Error,
		&created, &started, &finished); err != nil {
		return r, err
	}
	r.Weights = restapi.DimensionWeights{}
	if err := json.Unmarshal(weights, &r.Weights); err != nil {
		return r, fmt.Errorf("run %s weights: %w", r.ID, err)
	}
	var p runProgress
	if len(progress) > 0 {
		if err := json.Unmarshal(progress, &p); err != nil {
			return r, fmt.Errorf("run %s progress: %w", r.ID, err)
		}
	}
	r.Iteration, r.MetricCalls, r.FrontSize, r.BestScores = p.Iteration, p.MetricCalls, p.FrontSize, p.BestScores
	if r.BestScores == nil {
		r.BestScores = map[string]float64{}
	}
	if r.Components == nil {
		r.Components = []string{}
	}
	r.CreatedAt = ms(created)
	if started != nil {
		r.StartedAt = new(ms(*started))
	}
	if finished != nil {
		r.FinishedAt = new(ms(*finished))
	}
	r.Elites = []Elite{}
	return r, nil
}

// OptimizationRuns lists a scope's runs, newest first, without elites: a
// person's own (user set) or the installation's (user "").
func (s *Store) OptimizationRuns(ctx context.Context, user string, limit int) ([]OptimizationRun, error) {
	// Two statements, so each uses its index (a CASE on the parameter would not).
	q, args := `SELECT `+runColumns+` FROM prompt_optimization_runs r WHERE r.scope = 'installation'
		ORDER BY r.created_at DESC, r.id DESC LIMIT $1`, []any{limit}
	if user != "" {
		q, args = `SELECT `+runColumns+` FROM prompt_optimization_runs r WHERE r.scope = 'user' AND r.user_id = $1
		ORDER BY r.created_at DESC, r.id DESC LIMIT $2`, []any{user, limit}
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: optimisation runs: %w", err)
	}
	defer rows.Close()
	out := []OptimizationRun{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: optimisation runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// OptimizationRun reads run id with its candidates, best first by
// weighted score (those on the latest front first). ErrNotFound when
// there is none.
func (s *Store) OptimizationRun(ctx context.Context, id string) (OptimizationRun, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM prompt_optimization_runs r WHERE r.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("store: optimisation run: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT c.id, c.components, c.scores, c.score, c.on_front, c.best_on, c.examples,
			c.selected_at, COALESCE(c.prompt_version_ids, '{}')
		FROM prompt_candidates c WHERE c.run_id = $1
		ORDER BY c.on_front DESC, c.score DESC NULLS LAST, c.id`, id)
	if err != nil {
		return r, fmt.Errorf("store: optimisation run candidates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e Elite
		var components, scores, examples []byte
		var score *float32
		var onFront bool
		var selected *time.Time
		if err := rows.Scan(&e.CandidateID, &components, &scores, &score, &onFront, &e.BestOn, &examples, &selected, &e.PromotedVersionIds); err != nil {
			return r, fmt.Errorf("store: optimisation run candidates: %w", err)
		}
		if err := unmarshalAll(components, &e.Components, scores, &e.Scores, examples, &e.Examples); err != nil {
			return r, fmt.Errorf("store: candidate %s: %w", e.CandidateID, err)
		}
		if score != nil {
			e.Weighted = new(round3(*score))
		}
		e.OnFront = &onFront
		if selected != nil {
			e.PromotedAt = new(ms(*selected))
		}
		if e.Examples == nil {
			e.Examples = []restapi.EliteExample{}
		}
		r.Elites = append(r.Elites, e)
	}
	return r, rows.Err()
}

// unmarshalAll decodes pairs of (JSON, destination); empty JSON leaves
// its destination as it is.
func unmarshalAll(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		b, _ := pairs[i].([]byte)
		if len(b) == 0 {
			continue
		}
		if err := json.Unmarshal(b, pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Preferences are the latest dimension weights of a scope (user "": the
// installation's), and when they were set (ok false: never).
func (s *Store) Preferences(ctx context.Context, user string) (weights map[string]float64, at time.Time, ok bool, err error) {
	var raw []byte
	// Two statements, so each uses its partial index.
	if user == "" {
		err = s.pool.QueryRow(ctx, `SELECT weights, created_at FROM alicia_dimension_preferences
			WHERE scope = 'installation' ORDER BY created_at DESC, id DESC LIMIT 1`).Scan(&raw, &at)
	} else {
		err = s.pool.QueryRow(ctx, `SELECT weights, created_at FROM alicia_dimension_preferences
			WHERE scope = 'user' AND user_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, user).Scan(&raw, &at)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, false, nil
	}
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("store: dimension preferences: %w", err)
	}
	if err := json.Unmarshal(raw, &weights); err != nil {
		return nil, time.Time{}, false, fmt.Errorf("store: dimension preferences: %w", err)
	}
	return weights, at, true, nil
}

// Sharing reports whether user lets installation-wide runs learn from
// their conversations (their latest LearningConsent; none: no).
func (s *Store) Sharing(ctx context.Context, user string) (bool, error) {
	var share bool
	err := s.pool.QueryRow(ctx, `SELECT share FROM alicia_learning_consents WHERE user_id = $1`, user).Scan(&share)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: learning consent: %w", err)
	}
	return share, nil
}

// Sharers are the people who let installation-wide runs learn from their
// conversations.
func (s *Store) Sharers(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT user_id FROM alicia_learning_consents WHERE share ORDER BY user_id`)
	if err != nil {
		return nil, fmt.Errorf("store: learning consents: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: learning consents: %w", err)
	}
	return users, nil
}

// Candidate is a run's candidate as promotion needs it.
type Candidate struct {
	ID, RunID  string
	Components map[string]string
	Selected   bool
}

// RunCandidate reads candidate cand of run. ErrNotFound when the run has
// no such candidate.
func (s *Store) RunCandidate(ctx context.Context, run, cand string) (Candidate, error) {
	c := Candidate{ID: cand, RunID: run}
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT components, selected_at IS NOT NULL FROM prompt_candidates WHERE run_id = $1 AND id = $2`,
		run, cand).Scan(&raw, &c.Selected)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("store: candidate: %w", err)
	}
	if err := json.Unmarshal(raw, &c.Components); err != nil {
		return c, fmt.Errorf("store: candidate %s: %w", cand, err)
	}
	return c, nil
}

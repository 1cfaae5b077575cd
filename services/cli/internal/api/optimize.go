package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/alicia-voice/alicia/pkg/restapi"
)

// Prompt optimisation (/v1/optimize, services/gateway/API.md).
type (
	// OptimizePreferences are a scope's dimension weights.
	OptimizePreferences = restapi.OptimizePreferences
	// OptimizationRun is a run with its progress (and elites when read alone).
	OptimizationRun = restapi.OptimizationRun
	// Elite is a candidate of a run's last Pareto front.
	Elite = restapi.Elite
	// EliteExample is an elite's answer beside today's.
	EliteExample = restapi.EliteExample
)

func scopeQuery(scope string) url.Values {
	if scope == "" {
		return nil
	}
	return url.Values{"scope": {scope}}
}

// OptimizePreferences reads the dimension weights of scope (mine or
// installation; "" is mine).
func (c *Client) OptimizePreferences(ctx context.Context, scope string) (OptimizePreferences, error) {
	var out OptimizePreferences
	err := c.do(ctx, http.MethodGet, "/v1/optimize/preferences", scopeQuery(scope), nil, &out)
	return out, err
}

// SetOptimizePreferences stores the weights of scope as given (dimensions
// left out are not kept) and returns them as stored.
func (c *Client) SetOptimizePreferences(ctx context.Context, scope string, weights map[string]float64) (OptimizePreferences, error) {
	in := restapi.OptimizePreferencesPut{Weights: weights}
	if scope != "" {
		in.Scope = &scope
	}
	var out OptimizePreferences
	err := c.do(ctx, http.MethodPut, "/v1/optimize/preferences", nil, in, &out)
	return out, err
}

// OptimizeSharing reads whether installation-wide runs may learn from the
// caller's conversations.
func (c *Client) OptimizeSharing(ctx context.Context) (bool, error) {
	var out restapi.OptimizeSharing
	err := c.do(ctx, http.MethodGet, "/v1/optimize/sharing", nil, nil, &out)
	return out.Share, err
}

// SetOptimizeSharing opts the caller in to installation-wide runs (share)
// or out, and returns the choice as stored.
func (c *Client) SetOptimizeSharing(ctx context.Context, share bool) (bool, error) {
	var out restapi.OptimizeSharing
	err := c.do(ctx, http.MethodPut, "/v1/optimize/sharing", nil, restapi.OptimizeSharing{Share: share}, &out)
	return out.Share, err
}

// ListOptimizationRuns lists the runs of scope, newest first, without elites.
func (c *Client) ListOptimizationRuns(ctx context.Context, scope string) ([]OptimizationRun, error) {
	var out restapi.OptimizationRunList
	if err := c.do(ctx, http.MethodGet, "/v1/optimize/runs", scopeQuery(scope), nil, &out); err != nil {
		return nil, err
	}
	return out.Runs, nil
}

// StartOptimizationRun queues a run over components (nil: the server's
// default) spending at most budget metric calls.
func (c *Client) StartOptimizationRun(ctx context.Context, scope string, components []string, budget int32) (OptimizationRun, error) {
	in := restapi.OptimizationRunCreate{Components: components, Budget: budget}
	if scope != "" {
		in.Scope = &scope
	}
	var out OptimizationRun
	err := c.do(ctx, http.MethodPost, "/v1/optimize/runs", nil, in, &out)
	return out, err
}

// OptimizationRun reads run id with its elites.
func (c *Client) OptimizationRun(ctx context.Context, id string) (OptimizationRun, error) {
	var out OptimizationRun
	err := c.do(ctx, http.MethodGet, "/v1/optimize/runs/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// CancelOptimizationRun cancels run id (queued: at once; running: the
// optimiser is told) and returns it as it stands.
func (c *Client) CancelOptimizationRun(ctx context.Context, id string) (OptimizationRun, error) {
	var out OptimizationRun
	err := c.do(ctx, http.MethodPost, "/v1/optimize/runs/"+url.PathEscape(id)+"/cancel", nil, nil, &out)
	return out, err
}

// SelectElite promotes candidate of run: each text it changes becomes the
// active version of its component for all new conversations (share nil)
// or that share of them.
func (c *Client) SelectElite(ctx context.Context, run, candidate string, share *float64) ([]PromptVersion, error) {
	var out restapi.EliteSelected
	err := c.do(ctx, http.MethodPost, "/v1/optimize/runs/"+url.PathEscape(run)+"/select", nil,
		restapi.EliteSelectRequest{CandidateID: candidate, RolloutShare: share}, &out)
	return out.Versions, err
}

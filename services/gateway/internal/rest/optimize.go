package rest

import (
	"context"
	"errors"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// Prompt optimisation (issue 29; services/llm/README.md, "Prompt
// optimisation"). A person's runs learn from and change only their own
// answers; installation-wide runs are an administrator's, learn from the
// administrators' conversations and those of the people who opted in
// (LearningConsent), and change what serves everyone without a version of
// their own. A run changes nothing until one of its elites is promoted
// (EliteSelect). Every write is an envelope on alicia.sys, answered once
// persistence applied it; the llm's optimisers take the runs.

// Dimensions a run scores candidates on (DimensionPreference weights).
var Dimensions = []string{"correctness", "faithfulness", "relevancy", "userFeedback", "brevity", "latency"}

// metaPromptVersionIDs names, in an EliteSelect's meta, the versions the
// promotion made (comma-separated).
const metaPromptVersionIDs = "alicia.prompt_version_ids"

// runsListed: the most runs GET /v1/optimize/runs lists.
const runsListed = 50

// optimizable are the components a run may rewrite (tool:<name> too).
var optimizable = []string{promptver.System, promptver.VoiceStyle, promptver.Demonstrations}

// asSystemBy is a system envelope published for user (meta
// alicia.user_id), with Nats-Msg-Id msgID when not "".
func asSystemBy(body protocol.Body, user string, meta map[string]any, msgID string) publication {
	env := protocol.New("", body)
	env.Meta = map[string]any{edge.MetaUserID: user}
	for k, v := range meta {
		env.Meta[k] = v
	}
	return func(ctx context.Context, p *bus.Publisher) (*jetstream.PubAck, error) {
		return p.PublishSystem(ctx, env, msgID)
	}
}

// optimizeScope is a scope named in a request: mine ("" or absent) is the
// caller's (user set); installation is everyone's and needs an
// administrator when admin is asked.
func optimizeScope(c echo.Context, scope string, adminOnly bool) (user string, err error) {
	switch scope {
	case "", "mine":
		return auth.UserOf(c), nil
	case "installation":
		if adminOnly && !auth.IsAdmin(c) {
			return "", fail(http.StatusForbidden, "installation-wide optimisation is for administrators")
		}
		return "", nil
	}
	return "", fail(http.StatusBadRequest, "scope %q: use mine or installation", scope)
}

func scopeName(user string) string {
	if user == "" {
		return "installation"
	}
	return "mine"
}

// validWeights checks a dimension preference: known dimensions, 0..1,
// not all zero.
func validWeights(w map[string]float64) error {
	if len(w) == 0 {
		return fail(http.StatusBadRequest, "weights: give at least one of %s", strings.Join(Dimensions, ", "))
	}
	positive := false
	for d, v := range w {
		if !slices.Contains(Dimensions, d) {
			return fail(http.StatusBadRequest, "weights: unknown dimension %q (use %s)", d, strings.Join(Dimensions, ", "))
		}
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fail(http.StatusBadRequest, "weights: %s must be between 0 and 1", d)
		}
		positive = positive || v > 0
	}
	if !positive {
		return fail(http.StatusBadRequest, "weights: at least one dimension must weigh more than 0")
	}
	return nil
}

// protocolWeights is w as a DimensionPreference's weights (validWeights
// checked its dimensions).
func protocolWeights(w map[string]float64) protocol.Weights {
	var out protocol.Weights
	for d, v := range w {
		p := new(v)
		switch d {
		case "correctness":
			out.Correctness = p
		case "faithfulness":
			out.Faithfulness = p
		case "relevancy":
			out.Relevancy = p
		case "userFeedback":
			out.UserFeedback = p
		case "brevity":
			out.Brevity = p
		case "latency":
			out.Latency = p
		}
	}
	return out
}

// equalWeights are the weights of a scope that never set any.
func equalWeights() map[string]float64 {
	w := map[string]float64{}
	for _, d := range Dimensions {
		w[d] = 1
	}
	return w
}

func (a *API) preferencesOut(ctx context.Context, user string) (restapi.OptimizePreferences, error) {
	w, at, ok, err := a.Store.Preferences(ctx, user)
	if err != nil {
		return restapi.OptimizePreferences{}, err
	}
	out := restapi.OptimizePreferences{Scope: scopeName(user), Weights: equalWeights()}
	if ok {
		out.Weights, out.UpdatedAt = w, new(at.UnixMilli())
	}
	return out, nil
}

func (a *API) getOptimizePreferences(c echo.Context) error {
	user, err := optimizeScope(c, c.QueryParam("scope"), false)
	if err != nil {
		return err
	}
	out, err := a.preferencesOut(c.Request().Context(), user)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) putOptimizePreferences(c echo.Context) error {
	var in restapi.OptimizePreferencesPut
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	scope := ""
	if in.Scope != nil {
		scope = *in.Scope
	}
	user, err := optimizeScope(c, scope, true)
	if err != nil {
		return err
	}
	if err := validWeights(in.Weights); err != nil {
		return err
	}
	p := &protocol.DimensionPreference{ID: protocol.NewID("dp"), Scope: protocol.DimensionPreferenceScopeUser,
		Weights: protocolWeights(in.Weights), Timestamp: time.Now().UnixMilli()}
	if user == "" {
		p.Scope = protocol.DimensionPreferenceScopeInstallation
	}
	if err := a.write(c, asSystemBy(p, auth.UserOf(c), nil, p.ID)); err != nil {
		return err
	}
	out, err := a.preferencesOut(c.Request().Context(), user)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) getOptimizeSharing(c echo.Context) error {
	share, err := a.Store.Sharing(c.Request().Context(), auth.UserOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, restapi.OptimizeSharing{Share: share})
}

func (a *API) putOptimizeSharing(c echo.Context) error {
	var in restapi.OptimizeSharing
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	user := auth.UserOf(c)
	consent := &protocol.LearningConsent{UserID: user, Share: in.Share, Timestamp: time.Now().UnixMilli()}
	if err := a.write(c, asSystemBy(consent, user, nil, "")); err != nil {
		return err
	}
	return a.getOptimizeSharing(c)
}

func (a *API) listOptimizationRuns(c echo.Context) error {
	user, err := optimizeScope(c, c.QueryParam("scope"), true)
	if err != nil {
		return err
	}
	runs, err := a.Store.OptimizationRuns(c.Request().Context(), user, runsListed)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, restapi.OptimizationRunList{Runs: runs})
}

// validComponents checks the components a run is asked to rewrite.
func validComponents(cs []string) error {
	for _, c := range cs {
		if !slices.Contains(optimizable, c) && !(strings.HasPrefix(c, promptver.ToolPrefix) && len(c) > len(promptver.ToolPrefix)) {
			return fail(http.StatusBadRequest, "component %q: a run rewrites system, voice_style, demonstrations or tool:<name>", c)
		}
	}
	return nil
}

func (a *API) createOptimizationRun(c echo.Context) error {
	var in restapi.OptimizationRunCreate
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	scope := ""
	if in.Scope != nil {
		scope = *in.Scope
	}
	user, err := optimizeScope(c, scope, true)
	if err != nil {
		return err
	}
	if in.Budget < 1 || in.Budget > 100000 {
		return fail(http.StatusBadRequest, "budget: 1 to 100000 metric calls (one stored answer replayed and judged)")
	}
	if err := validComponents(in.Components); err != nil {
		return err
	}
	ctx := c.Request().Context()
	// One run at a time per scope: a person cannot fill the optimisers'
	// queue and keep everyone else's runs waiting.
	runs, err := a.Store.OptimizationRuns(ctx, user, runsListed)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Status == "queued" || r.Status == "running" {
			return fail(http.StatusConflict, "run %s is still %s: cancel it or wait for it to end", r.ID, r.Status)
		}
	}
	run := &protocol.OptimizationRun{ID: protocol.NewID("or"), UserID: auth.UserOf(c), Scope: protocol.OptimizationRunScopeUser,
		Components: in.Components, Budget: in.Budget, CreatedAt: time.Now().UnixMilli()}
	if w, _, ok, err := a.Store.Preferences(ctx, user); err != nil {
		return err
	} else if ok {
		run.Weights = protocol.OptimizationRunWeights(w)
	}
	if user == "" {
		run.Scope = protocol.OptimizationRunScopeInstallation
		sharers, err := a.Store.Sharers(ctx)
		if err != nil {
			return err
		}
		learnFrom := append(slices.Clone(a.Admins()), sharers...)
		slices.Sort(learnFrom)
		run.LearnFrom = slices.Compact(learnFrom)
	}
	if err := a.write(c, asSystemBy(run, auth.UserOf(c), nil, run.ID)); err != nil {
		return err
	}
	out, err := a.Store.OptimizationRun(ctx, run.ID)
	if err != nil {
		return lookup(err, "optimisation run")
	}
	return c.JSON(http.StatusAccepted, out)
}

// optimizationRun reads run :id for the caller: a person's own runs, the
// installation's for administrators; anyone else's is not found (its
// examples are other people's words).
func (a *API) optimizationRun(c echo.Context) (store.OptimizationRun, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return store.OptimizationRun{}, err
	}
	r, err := a.Store.OptimizationRun(c.Request().Context(), id)
	if err != nil {
		return r, lookup(err, "optimisation run")
	}
	mine := r.Scope == "user" && r.UserID != nil && *r.UserID == auth.UserOf(c)
	if !mine && !(r.Scope == "installation" && auth.IsAdmin(c)) {
		return r, fail(http.StatusNotFound, "optimisation run not found")
	}
	return r, nil
}

func (a *API) getOptimizationRun(c echo.Context) error {
	r, err := a.optimizationRun(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (a *API) cancelOptimizationRun(c echo.Context) error {
	r, err := a.optimizationRun(c)
	if err != nil {
		return err
	}
	switch r.Status {
	case "queued":
		// No optimiser holds it yet: recorded cancelled, an optimiser that
		// takes it later skips it (and one that took it meanwhile hears
		// the cancel below).
		o := &protocol.EliteOptions{RunID: r.ID, Status: protocol.EliteOptionsStatusCancelled, Budget: r.Budget}
		if err := a.write(c, asSystemBy(o, auth.UserOf(c), nil, "")); err != nil {
			return err
		}
	case "running":
	default:
		return fail(http.StatusConflict, "run %s already ended (%s)", r.ID, r.Status)
	}
	if err := a.NC.Publish(subjects.OptimizeCancel, []byte(r.ID)); err != nil {
		return fail(http.StatusServiceUnavailable, "the message bus did not take the cancellation; try again")
	}
	out, err := a.Store.OptimizationRun(c.Request().Context(), r.ID)
	if err != nil {
		return lookup(err, "optimisation run")
	}
	return c.JSON(http.StatusAccepted, out)
}

// selectElite promotes a run's elite (EliteSelect): each text it changes
// becomes a new version of its component in the run's scope, active for
// the share asked (all new conversations by default); then the
// EliteSelect records the promotion on the candidate. Rollback
// (/v1/prompt-versions/rollback) undoes it per component.
func (a *API) selectElite(c echo.Context) error {
	r, err := a.optimizationRun(c)
	if err != nil {
		return err
	}
	var in restapi.EliteSelectRequest
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.RolloutShare != nil && (math.IsNaN(*in.RolloutShare) || *in.RolloutShare < 0 || *in.RolloutShare > 1) {
		return fail(http.StatusBadRequest, "rolloutShare must be between 0 and 1")
	}
	if r.Status != "done" && r.Status != "cancelled" {
		return fail(http.StatusConflict, "run %s is %s: its elites are promoted once it ends", r.ID, r.Status)
	}
	ctx := c.Request().Context()
	cand, err := a.Store.RunCandidate(ctx, r.ID, in.CandidateID)
	if err != nil {
		return lookup(err, "candidate")
	}
	if cand.Selected {
		return fail(http.StatusConflict, "candidate %s was promoted already", cand.ID)
	}
	if len(cand.Components) == 0 {
		return fail(http.StatusConflict, "candidate %s changes nothing: it is what serves now", cand.ID)
	}
	owner := ""
	if r.Scope == "user" && r.UserID != nil {
		owner = *r.UserID
	}
	// The versions and the selection are published together, after every
	// version was made: a refusal (not yours, a bad share) publishes nothing.
	var pubs []publication
	admin := &promptver.Admin{Store: a.Prompts, Publish: func(_ context.Context, v *protocol.PromptVersion, msgID string) error {
		pubs = append(pubs, asSystemBy(v, auth.UserOf(c), nil, msgID))
		return nil
	}}
	now := time.Now()
	var versions []promptver.Record
	for _, component := range slices.Sorted(maps.Keys(cand.Components)) {
		v, err := admin.Adopt(ctx, actor(c), component, owner, cand.Components[component], "run:"+r.ID, in.RolloutShare, now)
		if err != nil {
			return promptErr(err)
		}
		versions = append(versions, v)
	}
	ids := make([]string, len(versions))
	for i, v := range versions {
		ids[i] = v.ID
	}
	sel := &protocol.EliteSelect{ID: protocol.NewID("es"), RunID: r.ID, CandidateID: cand.ID, RolloutShare: in.RolloutShare,
		Timestamp: now.UnixMilli()}
	pubs = append(pubs, asSystemBy(sel, auth.UserOf(c), map[string]any{metaPromptVersionIDs: strings.Join(ids, ",")}, sel.ID))
	if err := a.write(c, pubs...); err != nil {
		return err
	}
	out := restapi.EliteSelected{Versions: make([]restapi.PromptVersion, 0, len(versions))}
	for _, v := range versions {
		stored, err := a.Prompts.Get(ctx, v.ID)
		if errors.Is(err, promptver.ErrNotFound) {
			// Another promotion took its version number first.
			return fail(http.StatusConflict, "another version of %s was made at the same time; promote again", v.Component)
		}
		if err != nil {
			return err
		}
		out.Versions = append(out.Versions, promptVersionOut(stored, promptver.Tally{}))
	}
	return c.JSON(http.StatusOK, out)
}

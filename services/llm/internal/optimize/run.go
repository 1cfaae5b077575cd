package optimize

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
)

// Run tuning.
const (
	// MinTurns: a run needs at least this many stored turns (half to
	// train on, half to validate).
	MinTurns = 4
	// maxTurns: the most stored turns a run loads.
	maxTurns = 200
	// maxVal: the most turns held out to validate on.
	maxVal = 20
	// maxElites and maxExamples: what EliteOptions shows.
	maxElites   = 3
	maxExamples = 2
)

// ErrShutdown, as the cause of a run's context, means the service stops
// (not that the person cancelled): Run then reports nothing more.
var ErrShutdown = errors.New("optimize: the service is stopping")

// DefaultComponents are rewritten when a run names none.
var DefaultComponents = []string{ComponentSystem, ComponentVoiceStyle}

// Runner does optimisation runs: it loads the scope's stored turns,
// starts from the texts serving the scope, runs GEPA within the run's
// budget and reports its progress and elites as EliteOptions. It applies
// nothing: a candidate serves only when a person promotes it
// (EliteSelect), so a failed or cancelled run leaves nothing half-applied.
type Runner struct {
	// Turns loads a scope's stored turns (Load on a read-only session).
	Turns func(ctx context.Context, s Scope, limit int) ([]Turn, error)
	// Seed is the texts serving the scope now, by component.
	Seed func(ctx context.Context, s Scope) (gepa.Candidate, error)
	// Adapter replays and judges; Reflector rewrites.
	Adapter   *Adapter
	Reflector gepa.Reflector
	// Publish sends a progress report (EliteOptions).
	Publish func(ctx context.Context, o *protocol.EliteOptions) error
}

// Run does run r. Its error is the run's failure, also reported.
func (rn *Runner) Run(ctx context.Context, r *protocol.OptimizationRun) error {
	report := &protocol.EliteOptions{RunID: r.ID, Status: protocol.EliteOptionsStatusRunning, Budget: r.Budget, BestScores: map[string]float64{}}
	fail := func(err error) error {
		if errors.Is(context.Cause(ctx), ErrShutdown) {
			return ErrShutdown
		}
		report.Status, report.Error = protocol.EliteOptionsStatusFailed, protocol.Ptr(err.Error())
		if perr := rn.Publish(context.WithoutCancel(ctx), report); perr != nil {
			return errors.Join(err, perr)
		}
		return err
	}
	scope, err := scopeOf(r)
	if err != nil {
		return fail(err)
	}
	turns, err := rn.Turns(ctx, scope, maxTurns)
	if err != nil {
		return fail(err)
	}
	if len(turns) < MinTurns {
		return fail(fmt.Errorf("%d stored answers to learn from, %d needed: talk with Alicia a little more first", len(turns), MinTurns))
	}
	seed, err := rn.Seed(ctx, scope)
	if err != nil {
		return fail(err)
	}
	components := r.Components
	if len(components) == 0 {
		components = DefaultComponents
	}
	for _, c := range components {
		if _, ok := seed[c]; !ok {
			return fail(fmt.Errorf("no component %q to rewrite (have %s)", c, strings.Join(slices.Sorted(mapKeys(seed)), ", ")))
		}
	}
	train, val := split(turns)
	if err := rn.Publish(ctx, report); err != nil { // started
		return fmt.Errorf("optimize: report run %s: %w", r.ID, err)
	}
	rn.Adapter.keepOutputs()
	res, err := gepa.Optimize(ctx, gepa.Config[Turn]{Seed: seed, Components: components, Train: train, Val: val,
		Adapter: rn.Adapter, Reflector: rn.Reflector, MaxMetricCalls: int(r.Budget), Weights: map[string]float64(r.Weights),
		Rand: rand.New(rand.NewPCG(seedOf(r.ID), 0)),
		OnIteration: func(p gepa.Progress) {
			report.Iteration, report.MetricCalls, report.FrontSize = int32(p.Iteration), int32(p.MetricCalls), int32(p.FrontSize)
			report.BestScores = p.BestDimensionMeans
			_ = rn.Publish(ctx, report) // progress is best effort; the last report is not
		}})
	switch {
	case errors.Is(context.Cause(ctx), ErrShutdown):
		// The service stops: the run is handed back whole, and another
		// replica (or this one, restarted) does it again from the start.
		return ErrShutdown
	case res.Stop == gepa.StopCancelled || errors.Is(err, context.Canceled):
		report.Status = protocol.EliteOptionsStatusCancelled
	case err != nil:
		return fail(err)
	default:
		report.Status = protocol.EliteOptionsStatusDone
	}
	report.Iteration, report.MetricCalls, report.FrontSize = int32(res.Iterations), int32(res.MetricCalls), int32(len(res.Front))
	report.Elites = rn.elites(r.ID, res, seed, val)
	report.BestScores = bestScores(res.Pool)
	if err := rn.Publish(context.WithoutCancel(ctx), report); err != nil {
		return fmt.Errorf("optimize: report run %s: %w", r.ID, err)
	}
	return nil
}

// scopeOf is whose turns r learns from: the asker's alone, or for an
// installation-wide run the people the gateway resolved.
func scopeOf(r *protocol.OptimizationRun) (Scope, error) {
	switch r.Scope {
	case protocol.OptimizationRunScopeUser:
		if r.UserID == "" {
			return Scope{}, errors.New("a personal run without its person")
		}
		return Scope{UserIDs: []string{r.UserID}, Owner: r.UserID}, nil
	case protocol.OptimizationRunScopeInstallation:
		if len(r.LearnFrom) == 0 {
			return Scope{}, errors.New("an installation-wide run with nobody to learn from")
		}
		return Scope{UserIDs: r.LearnFrom}, nil
	}
	return Scope{}, fmt.Errorf("unknown scope %q", r.Scope)
}

// split holds out about half the turns (at most maxVal) to validate on,
// chosen by their ids, so a run over the same turns splits them the same.
func split(turns []Turn) (train, val []Turn) {
	sorted := slices.Clone(turns)
	sort.Slice(sorted, func(i, j int) bool { return seedOf(sorted[i].MessageID) < seedOf(sorted[j].MessageID) })
	n := min(len(sorted)/2, maxVal)
	return sorted[n:], sorted[:n]
}

func seedOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// elites are the front's best candidates by validation mean, with the
// components they change and example answers beside today's.
func (rn *Runner) elites(run string, res gepa.Result, seed gepa.Candidate, val []Turn) []protocol.Elite {
	front := slices.Clone(res.Front)
	sort.SliceStable(front, func(i, j int) bool { return res.Pool[front[i].Index].Mean > res.Pool[front[j].Index].Mean })
	var out []protocol.Elite
	for _, f := range front[:min(len(front), maxElites)] {
		m := res.Pool[f.Index]
		changed := map[string]string{}
		for k, v := range m.Candidate {
			if seed[k] != v {
				changed[k] = v
			}
		}
		e := protocol.Elite{CandidateID: runCandidateID(run, m.Candidate), Components: changed, Scores: protocol.EliteScores(m.DimensionMeans),
			Weighted: protocol.Ptr(m.Mean), BestOn: protocol.Ptr(int32(f.Wins))}
		for i, t := range val {
			out, ok := rn.Adapter.output(m.Candidate, t.MessageID)
			if ok && len(e.Examples) < maxExamples {
				e.Examples = append(e.Examples, protocol.Example{MessageID: t.MessageID, Question: t.Question, Current: t.Answer, Candidate: out})
			}
			if i < len(m.ValDimensions) && m.ValDimensions[i] != nil {
				ev := protocol.Evaluation{MessageID: t.MessageID, Scores: protocol.EvaluationScores(m.ValDimensions[i])}
				if ok {
					ev.Answer = protocol.Ptr(out)
				}
				e.Evaluations = append(e.Evaluations, ev)
			}
		}
		out = append(out, e)
	}
	return out
}

// bestScores is the best validation mean per dimension over the pool.
func bestScores(pool []gepa.Member) map[string]float64 {
	out := map[string]float64{}
	for _, m := range pool {
		for d, v := range m.DimensionMeans {
			out[d] = max(out[d], v)
		}
	}
	return out
}

// runCandidateID names a candidate of run by its texts: the same texts
// are the same candidate in every report of the run, and another run's
// candidate with the same texts is another candidate (its scores are that
// run's).
func runCandidateID(run string, c gepa.Candidate) string { return idOf(run, c) }

// candidateID names a candidate by its texts (pc_ and 20 characters of
// their hash), within a run.
func candidateID(c gepa.Candidate) string { return idOf("", c) }

func idOf(run string, c gepa.Candidate) string {
	h := fnv.New128a()
	_, _ = h.Write([]byte(run))
	_, _ = h.Write([]byte{0})
	for _, k := range slices.Sorted(mapKeys(c)) {
		_, _ = h.Write([]byte(k))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(c[k]))
		_, _ = h.Write([]byte{0})
	}
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := h.Sum(nil)
	b := []byte("pc_")
	for i := range 20 {
		b = append(b, alphabet[int(sum[i%len(sum)]+byte(i*7))%len(alphabet)])
	}
	return string(b)
}

func mapKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// outputs keeps what each candidate answered to each turn while a run
// goes on, for the elites' examples.
type outputs struct {
	mu sync.Mutex
	m  map[string]string
}

func (a *Adapter) keepOutputs() {
	a.outs = &outputs{m: map[string]string{}}
}

func (a *Adapter) keepOutput(c gepa.Candidate, turn, answer string) {
	if a.outs == nil {
		return
	}
	a.outs.mu.Lock()
	defer a.outs.mu.Unlock()
	a.outs.m[candidateID(c)+"\x00"+turn] = answer
}

func (a *Adapter) output(c gepa.Candidate, turn string) (string, bool) {
	if a.outs == nil {
		return "", false
	}
	a.outs.mu.Lock()
	defer a.outs.mu.Unlock()
	s, ok := a.outs.m[candidateID(c)+"\x00"+turn]
	return s, ok
}

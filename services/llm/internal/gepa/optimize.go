package gepa

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// Optimize runs GEPA until the budget cannot pay for another step, every
// validation example is solved, or ctx ends. It always returns what was
// found; the error wraps ctx.Err() when cancelled, or the adapter's or
// reflector's error.
func Optimize[E any](ctx context.Context, cfg Config[E]) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	r := newRun(cfg)
	if err := r.addSeed(ctx); err != nil {
		return r.finish(ctx, err)
	}
	for {
		if r.perfect() {
			r.stop = StopPerfect
			return r.result(), nil
		}
		if err := ctx.Err(); err != nil {
			return r.finish(ctx, err)
		}
		r.iter++
		p, err := r.step(ctx)
		if err != nil {
			r.iter--
			return r.finish(ctx, err)
		}
		r.report(p)
	}
}

type run[E any] struct {
	cfg     Config[E]
	rng     *rand.Rand
	comps   []string
	weights []string // weighted dimensions, sorted
	batches *minibatches

	pool []Member
	keys map[string]bool
	next []int // round-robin position per pool member

	calls     int
	iter      int
	stop      string
	mergesDue int
	merges    int
	lastNew   bool
	tried     map[[3]int]bool
}

func newRun[E any](cfg Config[E]) *run[E] {
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(0x6e9a, 0x2507))
	}
	if cfg.MinibatchSize == 0 {
		cfg.MinibatchSize = 3
	}
	cfg.MinibatchSize = min(cfg.MinibatchSize, len(cfg.Train))
	if cfg.MergeSubsample == 0 {
		cfg.MergeSubsample = 5
	}
	cfg.MergeSubsample = min(cfg.MergeSubsample, len(cfg.Val))
	if cfg.CandidateSelector == "" {
		cfg.CandidateSelector = SelectPareto
	}
	if cfg.ComponentSelector == "" {
		cfg.ComponentSelector = ComponentsRoundRobin
	}
	comps := sortedCopy(cfg.Components)
	if len(comps) == 0 {
		comps = sortedKeys(cfg.Seed)
	}
	return &run[E]{
		cfg:     cfg,
		rng:     cfg.Rand,
		comps:   comps,
		weights: sortedKeys(cfg.Weights),
		batches: newMinibatches(len(cfg.Train), cfg.MinibatchSize, cfg.Rand),
		keys:    map[string]bool{},
		tried:   map[[3]int]bool{},
	}
}

func (r *run[E]) remaining() int { return r.cfg.MaxMetricCalls - r.calls }

// evaluate runs the adapter on batch, paying for it first: an evaluation
// that would exceed the budget is not started.
func (r *run[E]) evaluate(ctx context.Context, batch []E, c Candidate, traces bool) (EvalBatch, []float64, error) {
	if len(batch) > r.remaining() {
		return EvalBatch{}, nil, errBudget
	}
	r.calls += len(batch)
	eb, err := r.cfg.Adapter.Evaluate(ctx, batch, c, traces)
	if err != nil {
		return EvalBatch{}, nil, fmt.Errorf("gepa: evaluate %d examples: %w", len(batch), err)
	}
	if len(eb.Outcomes) != len(batch) {
		return EvalBatch{}, nil, fmt.Errorf("%w: %d outcomes for %d examples", ErrBadEvaluation, len(eb.Outcomes), len(batch))
	}
	scores := make([]float64, len(batch))
	for i, o := range eb.Outcomes {
		if !unit(o.Score) {
			return EvalBatch{}, nil, fmt.Errorf("%w: score %v for example %d is outside [0, 1]", ErrBadEvaluation, o.Score, i)
		}
		for d, s := range o.Scores {
			if !unit(s) {
				return EvalBatch{}, nil, fmt.Errorf("%w: %s score %v for example %d is outside [0, 1]", ErrBadEvaluation, d, s, i)
			}
		}
		scores[i] = r.objective(o)
	}
	return eb, scores, nil
}

func unit(x float64) bool { return x >= 0 && x <= 1 } // false for NaN

func (r *run[E]) objective(o Outcome) float64 {
	var num, den float64
	for _, d := range r.weights {
		if s, ok := o.Scores[d]; ok {
			num += r.cfg.Weights[d] * s
			den += r.cfg.Weights[d]
		}
	}
	if den == 0 {
		return o.Score
	}
	return num / den
}

func (r *run[E]) addSeed(ctx context.Context) error {
	_, err := r.add(ctx, r.cfg.Seed.Clone(), nil, "seed", nil, nil)
	return err
}

// add scores c on the validation examples not in known (already evaluated
// ones, by validation index) and puts it in the pool.
func (r *run[E]) add(ctx context.Context, c Candidate, parents []int, origin string, changed []string, known map[int]Outcome) (int, error) {
	var idx []int
	var batch []E
	for i, ex := range r.cfg.Val {
		if _, ok := known[i]; !ok {
			idx = append(idx, i)
			batch = append(batch, ex)
		}
	}
	outs := make([]Outcome, len(r.cfg.Val))
	for i, o := range known {
		outs[i] = o
	}
	if len(batch) > 0 {
		eb, _, err := r.evaluate(ctx, batch, c, false)
		if err != nil {
			return -1, err
		}
		for j, i := range idx {
			outs[i] = eb.Outcomes[j]
		}
	}
	m := Member{Candidate: c, Parents: parents, Origin: origin, Iteration: r.iter, Changed: changed}
	m.ValScores = make([]float64, len(outs))
	m.ValDimensions = make([]map[string]float64, len(outs))
	for i, o := range outs {
		m.ValScores[i] = r.objective(o)
		m.ValDimensions[i] = o.Scores
	}
	m.Mean = mean(m.ValScores)
	m.DimensionMeans = dimensionMeans(m.ValDimensions)
	r.pool = append(r.pool, m)
	r.keys[c.key()] = true
	next := 0
	if len(parents) == 1 && len(changed) > 0 {
		// Carry on round the components from the one just rewritten.
		next = (indexOf(r.comps, changed[len(changed)-1]) + 1) % len(r.comps)
	}
	r.next = append(r.next, next)
	return len(r.pool) - 1, nil
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func (r *run[E]) step(ctx context.Context) (Progress, error) {
	if r.cfg.MaxMerges > 0 && r.mergesDue > 0 && r.lastNew && r.merges < r.cfg.MaxMerges {
		r.lastNew = false
		p, attempted, err := r.merge(ctx)
		if err != nil || attempted {
			return p, err
		}
	}
	r.lastNew = false
	return r.mutate(ctx)
}

func (r *run[E]) selectParent() int {
	if r.cfg.CandidateSelector == SelectCurrentBest {
		return r.best()
	}
	return SampleFront(r.front(), r.rng)
}

func (r *run[E]) front() []FrontEntry {
	scores := make([][]float64, len(r.pool))
	for k, m := range r.pool {
		scores[k] = m.ValScores
	}
	return ParetoFront(scores)
}

func (r *run[E]) best() int {
	b := 0
	for k, m := range r.pool {
		if m.Mean > r.pool[b].Mean {
			b = k
		}
	}
	return b
}

// perfect: some candidate solved every validation example; nothing is left
// to gain.
func (r *run[E]) perfect() bool {
	return len(r.pool) > 0 && r.pool[r.best()].Mean >= 1
}

func (r *run[E]) pickComponents(parent int) []string {
	if r.cfg.ComponentSelector == ComponentsAll {
		return r.comps
	}
	i := r.next[parent] % len(r.comps)
	r.next[parent] = (i + 1) % len(r.comps)
	return []string{r.comps[i]}
}

// mutate is one reflective mutation: parent on a training minibatch with
// traces, the reflector's new text, the child on the same minibatch, and
// the child on the validation set if it did strictly better.
func (r *run[E]) mutate(ctx context.Context) (Progress, error) {
	b := r.cfg.MinibatchSize
	if r.remaining() < 2*b+len(r.cfg.Val) {
		return Progress{}, errBudget
	}
	parent := r.selectParent()
	comps := r.pickComponents(parent)
	p := Progress{Kind: KindMutation, Parents: []int{parent}, Components: comps, Child: -1}
	var batch []E
	for _, i := range r.batches.next() {
		batch = append(batch, r.cfg.Train[i])
	}
	pc := r.pool[parent].Candidate
	eb, ps, err := r.evaluate(ctx, batch, pc, true)
	if err != nil {
		return p, err
	}
	p.ParentSum = sum(ps)
	if p.ParentSum >= float64(len(ps)) {
		p.Reason = "parent is perfect on the minibatch"
		return p, nil
	}
	records := r.cfg.Adapter.MakeReflectiveDataset(pc, eb, comps)
	child := pc.Clone()
	var changed []string
	for _, comp := range comps {
		recs := records[comp]
		if len(recs) == 0 {
			continue
		}
		text, err := r.cfg.Reflector.Propose(ctx, comp, pc[comp], recs)
		if err != nil {
			return p, fmt.Errorf("gepa: reflect on %s: %w", comp, err)
		}
		if text != pc[comp] {
			child[comp] = text
			changed = append(changed, comp)
		}
	}
	switch {
	case len(changed) == 0:
		p.Reason = "no change proposed"
		return p, nil
	case r.keys[child.key()]:
		p.Reason = "proposal is already in the pool"
		return p, nil
	}
	p.Components = changed
	_, cs, err := r.evaluate(ctx, batch, child, false)
	if err != nil {
		return p, err
	}
	p.ChildSum = sum(cs)
	if p.ChildSum <= p.ParentSum {
		p.Reason = "not better on the minibatch"
		return p, nil
	}
	idx, err := r.add(ctx, child, []int{parent}, "mutation", changed, nil)
	if err != nil {
		return p, err
	}
	p.Accepted, p.Child = true, idx
	r.lastNew = true
	if r.merges+r.mergesDue < r.cfg.MaxMerges {
		r.mergesDue++
	}
	return p, nil
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func (r *run[E]) report(p Progress) {
	p.Iteration = r.iter
	p.MetricCalls = r.calls
	p.PoolSize = len(r.pool)
	p.FrontSize = len(r.front())
	p.BestMean = r.pool[r.best()].Mean
	for _, m := range r.pool {
		for d, v := range m.DimensionMeans {
			if p.BestDimensionMeans == nil {
				p.BestDimensionMeans = map[string]float64{}
			}
			if cur, ok := p.BestDimensionMeans[d]; !ok || v > cur {
				p.BestDimensionMeans[d] = v
			}
		}
	}
	if r.cfg.OnIteration != nil {
		r.cfg.OnIteration(p)
	}
}

func (r *run[E]) result() Result {
	res := Result{Pool: r.pool, MetricCalls: r.calls, Iterations: r.iter, Stop: r.stop}
	if len(r.pool) > 0 {
		res.Front = r.front()
		res.Best = r.best()
	}
	return res
}

// finish ends the run on err: running out of budget is a normal end; a
// cancelled ctx is reported as such whatever error it caused downstream.
func (r *run[E]) finish(ctx context.Context, err error) (Result, error) {
	switch {
	case errors.Is(err, errBudget):
		r.stop = StopBudget
		return r.result(), nil
	case ctx.Err() != nil:
		r.stop = StopCancelled
		return r.result(), fmt.Errorf("gepa: stopped after %d of %d metric calls: %w", r.calls, r.cfg.MaxMetricCalls, ctx.Err())
	default:
		r.stop = StopError
		return r.result(), err
	}
}

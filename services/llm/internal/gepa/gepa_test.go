package gepa_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
)

func config(m *fakeModel, r gepa.Reflector, budget int, rngSeed uint64) gepa.Config[question] {
	return gepa.Config[question]{
		Seed:           seed,
		Train:          questions("t", map[string]int{"plain": 3, "brief": 3, "units": 3, "slow": 3}),
		Val:            questions("v", map[string]int{"plain": 2, "brief": 2, "units": 2, "slow": 2}),
		Adapter:        m,
		Reflector:      r,
		MaxMetricCalls: budget,
		MinibatchSize:  3,
		Rand:           rand.New(rand.NewPCG(rngSeed, 1)),
	}
}

// GEPA finds every instruction that raises the metric, from the feedback
// alone, well within the budget.
func TestOptimizeReachesBestScore(t *testing.T) {
	m := &fakeModel{}
	cfg := config(m, &fakeReflector{}, 400, 1)
	var steps []gepa.Progress
	cfg.OnIteration = func(p gepa.Progress) { steps = append(steps, p) }
	res, err := gepa.Optimize(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	best := res.Pool[res.Best]
	if best.Mean != 1 || res.Stop != gepa.StopPerfect {
		t.Fatalf("best mean %.2f, stop %q; want 1 and %q (pool %d, %d calls)", best.Mean, res.Stop, gepa.StopPerfect, len(res.Pool), res.MetricCalls)
	}
	for _, r := range rules {
		if !strings.Contains(best.Candidate[r.component], r.instruction) {
			t.Errorf("best %s = %q lacks %q", r.component, best.Candidate[r.component], r.instruction)
		}
	}
	if res.MetricCalls != m.calls || res.MetricCalls > cfg.MaxMetricCalls {
		t.Errorf("result says %d calls, adapter saw %d, budget %d", res.MetricCalls, m.calls, cfg.MaxMetricCalls)
	}
	if res.Pool[0].Mean != 0.25 || res.Pool[0].Origin != "seed" {
		t.Errorf("seed member = %+v, want the seed scored 0.25 on validation", res.Pool[0])
	}
	// Every accepted child points at an older parent and improved on it by a
	// changed component; progress is reported once per iteration.
	for k, mem := range res.Pool[1:] {
		if len(mem.Parents) == 0 || mem.Parents[0] >= k+1 || len(mem.Changed) == 0 {
			t.Errorf("member %d: parents %v, changed %v", k+1, mem.Parents, mem.Changed)
		}
	}
	if len(steps) != res.Iterations {
		t.Errorf("%d progress reports for %d iterations", len(steps), res.Iterations)
	}
	for k := 1; k < len(steps); k++ {
		if steps[k].BestMean < steps[k-1].BestMean || steps[k].MetricCalls <= steps[k-1].MetricCalls || steps[k].Iteration != k+1 {
			t.Errorf("progress %d after %d: %+v then %+v", k+1, k, steps[k-1], steps[k])
		}
	}
	if last := steps[len(steps)-1]; last.BestMean != 1 || last.PoolSize != len(res.Pool) || last.FrontSize != len(res.Front) {
		t.Errorf("last progress %+v, result pool %d front %d", last, len(res.Pool), len(res.Front))
	}
}

// A candidate that is best on a single example out of five stays on the
// front and is drawn as a parent about as often as it wins; the best-mean
// candidate is drawn for the other four. A candidate best nowhere is off
// the front even with the higher mean of the two losers.
func TestParetoFrontKeepsMinorityWinner(t *testing.T) {
	scores := [][]float64{
		{1, 1, 1, 1, 0},           // 0: best mean (0.8), best on four
		{0.2, 0.2, 0.2, 0.2, 1},   // 1: mean 0.36, the only one right on the last
		{0.9, 0.9, 0.9, 0.9, 0.5}, // 2: mean 0.82, best nowhere
		{1, 1, 0, 0, 0},           // 3: best only where 0 is too: dominated
	}
	front := gepa.ParetoFront(scores)
	want := []gepa.FrontEntry{{Index: 0, Wins: 4}, {Index: 1, Wins: 1}}
	if len(front) != len(want) || front[0] != want[0] || front[1] != want[1] {
		t.Fatalf("front = %+v, want %+v", front, want)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	drawn := map[int]int{}
	const n = 5000
	for i := 0; i < n; i++ {
		drawn[gepa.SampleFront(front, rng)]++
	}
	if share := float64(drawn[1]) / n; math.Abs(share-0.2) > 0.03 {
		t.Errorf("minority winner drawn %.3f of the time, want 0.2 ± 0.03 (%v)", share, drawn)
	}
	if drawn[2] != 0 || drawn[3] != 0 {
		t.Errorf("candidates off the front drawn: %v", drawn)
	}
}

func TestParetoFrontTies(t *testing.T) {
	cases := []struct {
		name   string
		scores [][]float64
		want   []gepa.FrontEntry
	}{
		{"identical keep the older", [][]float64{{1, 0}, {1, 0}}, []gepa.FrontEntry{{0, 2}}},
		{"equal wins, higher mean", [][]float64{{1, 0.2}, {1, 0.5}, {0, 0.5}}, []gepa.FrontEntry{{1, 2}}},
		{"complementary", [][]float64{{1, 0, 0.5}, {0, 1, 0.5}}, []gepa.FrontEntry{{0, 2}, {1, 2}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := gepa.ParetoFront(tc.scores)
			if len(got) != len(tc.want) {
				t.Fatalf("front = %+v, want %+v", got, tc.want)
			}
			for k := range got {
				if got[k] != tc.want[k] {
					t.Fatalf("front = %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

// A proposal that does no better on the minibatch never enters the pool
// and costs exactly the two minibatch evaluations.
func TestChildNotBetterIsNotAdded(t *testing.T) {
	for _, suffix := range []string{"Be kind.", "Answer in one sentence."} {
		t.Run(suffix, func(t *testing.T) {
			m := &fakeModel{}
			cfg := config(m, constReflector{suffix}, 100, 2)
			// Only slow questions: no suffix in any component helps them.
			cfg.Train = questions("t", map[string]int{"slow": 6})
			var steps []gepa.Progress
			cfg.OnIteration = func(p gepa.Progress) { steps = append(steps, p) }
			res, err := gepa.Optimize(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Pool) != 1 {
				t.Fatalf("pool has %d members, want only the seed", len(res.Pool))
			}
			for _, p := range steps {
				if p.Accepted || p.Child != -1 || p.Reason != "not better on the minibatch" || p.ChildSum > p.ParentSum {
					t.Errorf("step %+v", p)
				}
			}
			if want := len(cfg.Val) + 2*3*res.Iterations; res.MetricCalls != want || len(steps) == 0 {
				t.Errorf("%d calls over %d iterations, want %d", res.MetricCalls, res.Iterations, want)
			}
		})
	}
}

// The adapter never evaluates more examples than the budget, whatever the
// budget, selector and merge setting; the run stops only when the next step
// could not be paid for, or nothing is left to gain.
func TestBudgetNeverExceeded(t *testing.T) {
	for _, budget := range []int{8, 13, 14, 21, 37, 60, 99, 150} {
		for _, merges := range []int{0, 5} {
			for _, sel := range []string{gepa.SelectPareto, gepa.SelectCurrentBest} {
				for s := uint64(1); s <= 3; s++ {
					m := &fakeModel{}
					cfg := config(m, &fakeReflector{}, budget, s)
					cfg.MaxMerges, cfg.CandidateSelector = merges, sel
					res, err := gepa.Optimize(context.Background(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					if m.calls > budget || m.calls != res.MetricCalls {
						t.Fatalf("budget %d merges %d %s seed %d: adapter evaluated %d, result says %d", budget, merges, sel, s, m.calls, res.MetricCalls)
					}
					switch res.Stop {
					case gepa.StopBudget:
						if left := budget - m.calls; left >= 2*3+len(cfg.Val) {
							t.Errorf("budget %d: stopped with %d calls left, enough for a step", budget, left)
						}
					case gepa.StopPerfect:
						if res.Pool[res.Best].Mean != 1 {
							t.Errorf("stopped as perfect with best mean %.2f", res.Pool[res.Best].Mean)
						}
					default:
						t.Errorf("stop %q", res.Stop)
					}
				}
			}
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	_, err := gepa.Optimize(context.Background(), gepa.Config[question]{MaxMetricCalls: 1, Val: []question{{}, {}}, ComponentSelector: "random"})
	if !errors.Is(err, gepa.ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"Seed", "Train", "Adapter", "Reflector", "MaxMetricCalls 1", "ComponentSelector"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// Cancelling stops the run with an error wrapping context.Canceled and the
// pool as it was: never a half-scored candidate.
func TestCancelReturnsWhatWasFound(t *testing.T) {
	t.Run("between iterations", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := &fakeModel{}
		cfg := config(m, &fakeReflector{}, 400, 1)
		cfg.OnIteration = func(p gepa.Progress) {
			if p.Accepted {
				cancel()
			}
		}
		res, err := gepa.Optimize(ctx, cfg)
		if !errors.Is(err, context.Canceled) || res.Stop != gepa.StopCancelled {
			t.Fatalf("err = %v, stop %q", err, res.Stop)
		}
		if len(res.Pool) != 2 || res.Pool[res.Best].Mean <= res.Pool[0].Mean || res.MetricCalls != m.calls {
			t.Errorf("pool %d, best mean %.2f, calls %d/%d", len(res.Pool), res.Pool[res.Best].Mean, res.MetricCalls, m.calls)
		}
	})
	t.Run("during a child's validation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := &fakeModel{}
		evals := 0
		m.onEvaluate = func(ctx context.Context, batch []question, c gepa.Candidate) error {
			evals++
			if evals > 1 && len(batch) == 8 { // the first child's validation
				cancel()
				return ctx.Err()
			}
			return nil
		}
		res, err := gepa.Optimize(ctx, config(m, &fakeReflector{}, 400, 1))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if len(res.Pool) != 1 || len(res.Front) != 1 || res.Iterations != 0 {
			t.Errorf("pool %d front %d iterations %d, want only the seed", len(res.Pool), len(res.Front), res.Iterations)
		}
	})
}

// Two candidates that improved different components of a common ancestor
// merge into one that takes each one's change, judged on validation
// examples where they differ, and kept since it beats both.
func TestMergeCombinesComplementaryCandidates(t *testing.T) {
	a := seed.Clone()
	a["system"] = "You are Alicia. Add units to every measurement."
	b := seed.Clone()
	b["voice_style"] = "Be warm. Speak slowly."
	m := &fakeModel{}
	cfg := config(m, &fakeReflector{}, 100, 3)
	cfg.MaxMerges, cfg.MergeSubsample = 1, 4
	p, attempted, res, err := gepa.MergeOnce(context.Background(), cfg, []gepa.Candidate{seed, a, b}, [][]int{nil, {0}, {0}})
	if err != nil || !attempted {
		t.Fatalf("attempted %v, err %v", attempted, err)
	}
	if !p.Accepted || p.Kind != gepa.KindMerge || len(res.Pool) != 4 {
		t.Fatalf("progress %+v, pool %d", p, len(res.Pool))
	}
	child := res.Pool[3]
	if child.Candidate["system"] != a["system"] || child.Candidate["voice_style"] != b["voice_style"] {
		t.Errorf("merged = %v", child.Candidate)
	}
	if len(child.Parents) != 2 || child.Origin != "merge" || child.Mean != 0.75 || p.ChildSum != 4 || p.ParentSum != 2 {
		t.Errorf("child %+v, progress %+v", child, p)
	}
	// Seed (3×8) + the subsample (4) + the rest of validation (4).
	if m.calls != 3*8+8 || res.MetricCalls != m.calls {
		t.Errorf("calls %d (adapter %d)", res.MetricCalls, m.calls)
	}
}

// Weights make the objective a weighted mean of the dimensions.
func TestWeightedDimensions(t *testing.T) {
	m := dimModel{}
	cfg := gepa.Config[question]{
		Seed: seed, Train: questions("t", map[string]int{"plain": 2}), Val: questions("v", map[string]int{"plain": 2}),
		Adapter: m, Reflector: constReflector{"x"}, MaxMetricCalls: 2,
		Weights: map[string]float64{"correctness": 3, "brevity": 1},
	}
	res, err := gepa.Optimize(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if mean := res.Pool[0].Mean; math.Abs(mean-(3*1+1*0.2)/4) > 1e-9 {
		t.Errorf("mean %.3f, want 0.8", mean)
	}
	if dm := res.Pool[0].DimensionMeans; dm["correctness"] != 1 || dm["brevity"] != 0.2 || dm["latency"] != 0.5 {
		t.Errorf("dimension means %v", dm)
	}
}

type dimModel struct{}

func (dimModel) Evaluate(_ context.Context, batch []question, _ gepa.Candidate, _ bool) (gepa.EvalBatch, error) {
	var eb gepa.EvalBatch
	for range batch {
		eb.Outcomes = append(eb.Outcomes, gepa.Outcome{Score: 0, Scores: map[string]float64{"correctness": 1, "brevity": 0.2, "latency": 0.5}})
	}
	return eb, nil
}

func (dimModel) MakeReflectiveDataset(gepa.Candidate, gepa.EvalBatch, []string) map[string][]gepa.ReflectiveRecord {
	return nil
}

// On the task with conflicting instructions the lines diverge; merges are
// tried after accepted mutations and a kept merge takes every component
// from one of its two parents. Every run reaches the best achievable mean.
func TestOptimizeMergesDivergentLines(t *testing.T) {
	best, _ := bestAchievable(taskVal)
	merged := 0
	for s := uint64(1); s <= 8; s++ {
		cfg := gepa.Config[question]{
			Seed: taskSeed, Train: taskTrain, Val: taskVal, Adapter: &taskModel{}, Reflector: taskReflector{},
			MaxMetricCalls: 1500, MaxMerges: 5, Rand: rand.New(rand.NewPCG(s, 99)),
		}
		res, err := gepa.Optimize(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Pool[res.Best].Mean; got != best {
			t.Errorf("seed %d: best mean %.3f, want the best achievable %.3f", s, got, best)
		}
		for _, mem := range res.Pool {
			if mem.Origin != "merge" {
				continue
			}
			merged++
			if len(mem.Parents) != 2 {
				t.Fatalf("merge with parents %v", mem.Parents)
			}
			p0, p1 := res.Pool[mem.Parents[0]].Candidate, res.Pool[mem.Parents[1]].Candidate
			for comp, text := range mem.Candidate {
				if text != p0[comp] && text != p1[comp] {
					t.Errorf("merge %v has %s from neither parent", mem.Candidate, comp)
				}
			}
		}
	}
	if merged == 0 {
		t.Error("no merge kept over 8 seeds")
	}
}

// The same Rand gives the same run.
func TestDeterministicGivenRand(t *testing.T) {
	run := func() gepa.Result {
		res, err := gepa.Optimize(context.Background(), gepa.Config[question]{
			Seed: taskSeed, Train: taskTrain, Val: taskVal, Adapter: &taskModel{}, Reflector: taskReflector{},
			MaxMetricCalls: 600, MaxMerges: 3, Rand: rand.New(rand.NewPCG(5, 5)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(), run()
	if len(a.Pool) != len(b.Pool) || a.MetricCalls != b.MetricCalls || a.Iterations != b.Iterations {
		t.Fatalf("runs differ: pool %d/%d calls %d/%d", len(a.Pool), len(b.Pool), a.MetricCalls, b.MetricCalls)
	}
	for k := range a.Pool {
		if !reflect.DeepEqual(a.Pool[k], b.Pool[k]) {
			t.Fatalf("member %d differs", k)
		}
	}
}

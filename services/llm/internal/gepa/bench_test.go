package gepa_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
)

const benchBudget = 1500

type method struct {
	name      string
	selector  string
	reflector func(rng *rand.Rand) gepa.Reflector
	merges    int
}

var methods = []method{
	{"gepa", gepa.SelectPareto, func(*rand.Rand) gepa.Reflector { return taskReflector{} }, 0},
	{"gepa_merge", gepa.SelectPareto, func(*rand.Rand) gepa.Reflector { return taskReflector{} }, 5},
	{"hillclimb", gepa.SelectCurrentBest, func(*rand.Rand) gepa.Reflector { return taskReflector{} }, 0},
	{"random", gepa.SelectCurrentBest, func(rng *rand.Rand) gepa.Reflector { return randomReflector{rng} }, 0},
}

// callsToTarget runs one method on one seed and returns the metric calls
// spent when the best validation mean first reached target (0 if never)
// and the final best mean.
func callsToTarget(tb testing.TB, m method, seed uint64, target float64) (int, float64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	reached := 0
	cfg := gepa.Config[question]{
		Seed: taskSeed, Train: taskTrain, Val: taskVal,
		Adapter: &taskModel{}, Reflector: m.reflector(rand.New(rand.NewPCG(seed, 7))),
		MaxMetricCalls: benchBudget, MinibatchSize: 3, MaxMerges: m.merges,
		CandidateSelector: m.selector, Rand: rng,
		OnIteration: func(p gepa.Progress) {
			if reached == 0 && p.BestMean >= target {
				reached = p.MetricCalls
			}
		},
	}
	res, err := gepa.Optimize(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if reached == 0 && res.Pool[0].Mean >= target {
		reached = len(taskVal)
	}
	return reached, res.Pool[res.Best].Mean
}

// BenchmarkGEPA: metric calls until the best validation mean reaches 90 %
// of the best achievable one, over 5 seeds, with the same budget for GEPA
// (with and without merge), a greedy best-mean hill climb with the same
// reflection, and random mutation (same loop and minibatch gate, a random
// instruction of the proposal space instead of reflection). A seed that
// never reaches the target counts as the whole budget in the mean.
func BenchmarkGEPA(b *testing.B) {
	best, _ := bestAchievable(taskVal)
	target := 0.9 * best
	b.ReportMetric(best, "best_achievable")
	total := make([]int, len(methods))
	hit := make([]int, len(methods))
	final := make([]float64, len(methods))
	for b.Loop() {
		for k, m := range methods {
			total[k], hit[k], final[k] = 0, 0, 0
			for s := uint64(1); s <= 5; s++ {
				calls, fin := callsToTarget(b, m, s, target)
				final[k] += fin / 5
				if calls > 0 {
					hit[k]++
					total[k] += calls
				} else {
					total[k] += benchBudget
				}
			}
		}
	}
	for k, m := range methods {
		b.ReportMetric(float64(total[k])/5, m.name+"_calls_to_90%")
		b.ReportMetric(float64(hit[k]), m.name+"_seeds_reached/5")
		b.ReportMetric(final[k], m.name+"_final_best_mean")
	}
}

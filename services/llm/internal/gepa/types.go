package gepa

import (
	"context"
	"math/rand/v2"
	"sort"
	"strings"
)

// Candidate maps a component name ("system", "voice_style",
// "tool:web_search", …) to its text.
type Candidate map[string]string

// Clone returns a copy that can be changed without touching c.
func (c Candidate) Clone() Candidate {
	out := make(Candidate, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// key is a canonical form, to recognise a candidate already in the pool.
func (c Candidate) key() string {
	var b strings.Builder
	for _, k := range sortedKeys(c) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(c[k])
		b.WriteByte(0)
	}
	return b.String()
}

// Outcome is one example's evaluation.
type Outcome struct {
	// Score in [0, 1]: the objective unless Config.Weights is set and Scores
	// holds at least one weighted dimension.
	Score float64
	// Scores per dimension ("correctness", "brevity", …), each in [0, 1].
	Scores map[string]float64
	// Output is what the system produced; Feedback is the textual feedback
	// (judge rationale, a person's note or vote reason); Trace is anything
	// else the adapter wants back in MakeReflectiveDataset. Opaque here.
	Output   string
	Feedback string
	Trace    string
}

// EvalBatch holds one Outcome per example of the evaluated batch, in order.
type EvalBatch struct {
	Outcomes []Outcome
}

// ReflectiveRecord is what the reflection model reads about one example.
type ReflectiveRecord struct {
	Inputs   string
	Output   string
	Feedback string
	Score    float64
}

// Adapter runs the system under optimisation. E is whatever an example is
// (a stored turn, a question and its answer key).
type Adapter[E any] interface {
	// Evaluate runs candidate c on every example of batch. Traces are asked
	// for when the outcomes will be reflected on.
	Evaluate(ctx context.Context, batch []E, c Candidate, captureTraces bool) (EvalBatch, error)
	// MakeReflectiveDataset turns an evaluation (with traces) into records
	// per component, for the components about to be rewritten.
	MakeReflectiveDataset(c Candidate, eval EvalBatch, components []string) map[string][]ReflectiveRecord
}

// Reflector is the reflection model: it rewrites one component's text from
// the records of how the current text did.
type Reflector interface {
	Propose(ctx context.Context, component, currentText string, records []ReflectiveRecord) (string, error)
}

// Selection strategies for Config.CandidateSelector.
const (
	SelectPareto      = "pareto"
	SelectCurrentBest = "current_best"
)

// Component strategies for Config.ComponentSelector.
const (
	ComponentsRoundRobin = "round_robin"
	ComponentsAll        = "all"
)

// Config is one optimisation run.
type Config[E any] struct {
	Seed Candidate
	// Components to rewrite; default every component of Seed, sorted.
	Components []string
	Train, Val []E
	Adapter    Adapter[E]
	Reflector  Reflector
	// MaxMetricCalls bounds the examples evaluated (one call = one example
	// run through the adapter), seed included. Never exceeded.
	MaxMetricCalls int
	// MinibatchSize is the number of training examples per reflection
	// (default 3, at most len(Train)).
	MinibatchSize int
	// MaxMerges is how many merges may be evaluated; 0 disables merging.
	MaxMerges int
	// MergeSubsample is how many validation examples a merge is first
	// judged on (default 5, at most len(Val)).
	MergeSubsample int
	// ComponentSelector: "round_robin" (default) or "all".
	ComponentSelector string
	// CandidateSelector: "pareto" (default) or "current_best" (greedy hill
	// climb on the best validation mean; a baseline).
	CandidateSelector string
	// Weights turn Outcome.Scores into the objective: the weighted mean of
	// the weighted dimensions an outcome has. Empty: Outcome.Score.
	Weights map[string]float64
	// Rand drives every random choice; a run is deterministic given it
	// (and a deterministic adapter and reflector). Default: a fixed seed.
	Rand *rand.Rand
	// OnIteration is called synchronously after every iteration.
	OnIteration func(Progress)
}

// Member is a candidate of the pool with its validation scores.
type Member struct {
	Candidate Candidate
	// Parents are pool indices: none for the seed, one for a mutation,
	// two for a merge.
	Parents []int
	// Origin is "seed", "mutation" or "merge"; Iteration the one that made it.
	Origin    string
	Iteration int
	// Changed lists the components that differ from the parent (for a
	// merge, from the common ancestor).
	Changed []string
	// ValScores[i] is the objective on validation example i; ValDimensions[i]
	// its per-dimension scores (nil when the adapter gave none).
	ValScores      []float64
	ValDimensions  []map[string]float64
	Mean           float64
	DimensionMeans map[string]float64
}

// Iteration kinds in Progress.Kind.
const (
	KindMutation = "mutation"
	KindMerge    = "merge"
)

// Progress reports one iteration.
type Progress struct {
	Iteration  int
	Kind       string
	Parents    []int
	Components []string
	Accepted   bool
	// Child is the new candidate's pool index, or -1.
	Child int
	// Reason says why a proposal was rejected ("" when accepted).
	Reason string
	// ParentSum and ChildSum are the minibatch (or merge subsample) score
	// sums the decision was made on; for a merge ParentSum is the better
	// parent's.
	ParentSum, ChildSum float64
	MetricCalls         int
	PoolSize, FrontSize int
	BestMean            float64
	// BestDimensionMeans holds, per dimension, the best mean over the pool.
	BestDimensionMeans map[string]float64
}

// Stop reasons in Result.Stop.
const (
	StopBudget    = "budget"
	StopPerfect   = "perfect"
	StopCancelled = "cancelled"
	StopError     = "error"
)

// Result is what a run found, also when it stopped early.
type Result struct {
	Pool        []Member
	Front       []FrontEntry
	Best        int
	MetricCalls int
	Iterations  int
	Stop        string
}

// BestCandidate is the pool's candidate with the highest validation mean.
func (r Result) BestCandidate() Candidate {
	if len(r.Pool) == 0 {
		return nil
	}
	return r.Pool[r.Best].Candidate
}

func dimensionMeans(dims []map[string]float64) map[string]float64 {
	sum := map[string]float64{}
	n := map[string]int{}
	for _, d := range dims {
		for k, v := range d {
			sum[k] += v
			n[k]++
		}
	}
	if len(sum) == 0 {
		return nil
	}
	out := make(map[string]float64, len(sum))
	for k, s := range sum {
		out[k] = s / float64(n[k])
	}
	return out
}

func sortedCopy(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

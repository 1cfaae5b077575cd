package gepa_test

import (
	"context"
	"sort"
	"strings"

	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
)

// question is a synthetic example: the fake model answers it well only
// when the candidate carries the instruction its kind needs.
type question struct {
	ID   string
	Kind string // "plain", "brief", "units", "slow"
}

// rule: a kind of question, the component and instruction that make the
// model answer it well, and the feedback it gets otherwise.
type rule struct {
	kind, component, instruction, feedback string
}

var rules = []rule{
	{"brief", "system", "Answer in one sentence.", "too long: three sentences where one was asked for"},
	{"units", "system", "Add units to every measurement.", "missing units: said 12 instead of 12 km"},
	{"slow", "voice_style", "Speak slowly.", "spoken too fast to follow"},
}

func ruleFor(kind string) (rule, bool) {
	for _, r := range rules {
		if r.kind == kind {
			return r, true
		}
	}
	return rule{}, false
}

// fakeModel follows the instructions it finds in the candidate's texts.
// It counts every example it evaluates; onEvaluate runs first when set.
type fakeModel struct {
	calls      int
	onEvaluate func(ctx context.Context, batch []question, c gepa.Candidate) error
}

func (m *fakeModel) Evaluate(ctx context.Context, batch []question, c gepa.Candidate, traces bool) (gepa.EvalBatch, error) {
	m.calls += len(batch)
	if m.onEvaluate != nil {
		if err := m.onEvaluate(ctx, batch, c); err != nil {
			return gepa.EvalBatch{}, err
		}
	}
	var eb gepa.EvalBatch
	for _, q := range batch {
		o := gepa.Outcome{Score: 1, Output: "fine", Feedback: "correct", Trace: "question " + q.ID + " (" + q.Kind + ")"}
		if r, ok := ruleFor(q.Kind); ok && !strings.Contains(strings.ToLower(c[r.component]), strings.ToLower(r.instruction)) {
			o.Score, o.Output, o.Feedback = 0, "not quite", r.feedback
		}
		eb.Outcomes = append(eb.Outcomes, o)
	}
	return eb, nil
}

func (m *fakeModel) MakeReflectiveDataset(c gepa.Candidate, eb gepa.EvalBatch, components []string) map[string][]gepa.ReflectiveRecord {
	return everyOutcome(eb, components)
}

// fakeReflector reads the feedback of the failed examples and appends the
// instruction that answers the most frequent complaint about component.
type fakeReflector struct {
	proposals int
}

func (f *fakeReflector) Propose(_ context.Context, component, text string, records []gepa.ReflectiveRecord) (string, error) {
	f.proposals++
	count := map[string]int{}
	for _, rec := range records {
		if rec.Score >= 1 {
			continue
		}
		for _, r := range rules {
			if r.component == component && strings.Contains(rec.Feedback, strings.SplitN(r.feedback, ":", 2)[0]) &&
				!strings.Contains(text, r.instruction) {
				count[r.instruction]++
			}
		}
	}
	if len(count) == 0 {
		return text, nil
	}
	ins := make([]string, 0, len(count))
	for k := range count {
		ins = append(ins, k)
	}
	sort.Slice(ins, func(a, b int) bool {
		if count[ins[a]] != count[ins[b]] {
			return count[ins[a]] > count[ins[b]]
		}
		return ins[a] < ins[b]
	})
	return strings.TrimSpace(text + " " + ins[0]), nil
}

// constReflector appends the same sentence whatever the feedback.
type constReflector struct{ suffix string }

func (c constReflector) Propose(_ context.Context, _, text string, _ []gepa.ReflectiveRecord) (string, error) {
	return text + " " + c.suffix, nil
}

func questions(prefix string, kinds map[string]int) []question {
	var qs []question
	for _, k := range []string{"plain", "brief", "units", "slow"} {
		for i := 0; i < kinds[k]; i++ {
			qs = append(qs, question{ID: prefix + k + string(rune('a'+i)), Kind: k})
		}
	}
	return qs
}

var seed = gepa.Candidate{"system": "You are Alicia.", "voice_style": "Be warm."}

// everyOutcome is the reflective dataset of both fake models: every
// outcome of the batch, for each component.
func everyOutcome(eb gepa.EvalBatch, components []string) map[string][]gepa.ReflectiveRecord {
	out := map[string][]gepa.ReflectiveRecord{}
	for _, comp := range components {
		for _, o := range eb.Outcomes {
			out[comp] = append(out[comp], gepa.ReflectiveRecord{Inputs: o.Trace, Output: o.Output, Feedback: o.Feedback, Score: o.Score})
		}
	}
	return out
}

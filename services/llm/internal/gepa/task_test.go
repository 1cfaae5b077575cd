package gepa_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
)

// A synthetic task with a known best prompt: independent instructions,
// each helping one kind of question, and two that conflict (one sentence
// vs explaining the steps: the later one in the text wins), so no prompt is
// best on every example.

type instruction struct {
	component, text, kind, feedback, conflict string
}

var catalogue = []instruction{
	{"system", "Add units to every measurement.", "units", "missing units", ""},
	{"system", "Answer in one sentence.", "brief", "too long", "steps"},
	{"system", "Explain the steps.", "steps", "skipped the steps", "brief"},
	{"system", "Cite the source.", "cite", "no source given", ""},
	{"voice_style", "Speak slowly.", "slow", "spoken too fast", ""},
	{"voice_style", "Spell out names.", "names", "names garbled", ""},
}

// distractors are in the random proposal space and help nothing.
var distractors = []instruction{
	{"system", "Be polite.", "", "", ""},
	{"voice_style", "Use a cheerful tone.", "", "", ""},
}

func instructionFor(kind string) (instruction, bool) {
	for _, in := range catalogue {
		if in.kind == kind {
			return in, true
		}
	}
	return instruction{}, false
}

// answers reports whether c makes the model answer a question of kind well,
// and the feedback when it does not.
func answers(c gepa.Candidate, kind string) (bool, string) {
	in, ok := instructionFor(kind)
	if !ok {
		return true, ""
	}
	text := c[in.component]
	at := strings.LastIndex(text, in.text)
	if at < 0 {
		return false, in.feedback
	}
	if in.conflict != "" {
		other, _ := instructionFor(in.conflict)
		if strings.LastIndex(text, other.text) > at {
			return false, in.feedback
		}
	}
	return true, ""
}

type taskModel struct{ calls int }

func (m *taskModel) Evaluate(_ context.Context, batch []question, c gepa.Candidate, _ bool) (gepa.EvalBatch, error) {
	m.calls += len(batch)
	var eb gepa.EvalBatch
	for _, q := range batch {
		ok, fb := answers(c, q.Kind)
		o := gepa.Outcome{Score: 1, Output: "good answer", Feedback: "correct", Trace: q.ID}
		if !ok {
			o.Score, o.Output, o.Feedback = 0, "poor answer", fb
		}
		eb.Outcomes = append(eb.Outcomes, o)
	}
	return eb, nil
}

func (m *taskModel) MakeReflectiveDataset(_ gepa.Candidate, eb gepa.EvalBatch, components []string) map[string][]gepa.ReflectiveRecord {
	return everyOutcome(eb, components)
}

// taskReflector appends the instruction answering the most frequent
// complaint about the component; an instruction already there is moved to
// the end (so a conflict can be settled either way).
type taskReflector struct{}

func (taskReflector) Propose(_ context.Context, component, text string, records []gepa.ReflectiveRecord) (string, error) {
	count := map[string]int{}
	for _, rec := range records {
		for _, in := range catalogue {
			if rec.Score < 1 && in.component == component && rec.Feedback == in.feedback {
				count[in.text]++
			}
		}
	}
	if len(count) == 0 {
		return text, nil
	}
	best := ""
	for _, t := range sortedStrings(count) {
		if best == "" || count[t] > count[best] {
			best = t
		}
	}
	return appendInstruction(text, best), nil
}

// randomReflector ignores the feedback: it appends a random instruction of
// the component's proposal space (distractors included).
type randomReflector struct{ rng *rand.Rand }

func (r randomReflector) Propose(_ context.Context, component, text string, _ []gepa.ReflectiveRecord) (string, error) {
	var space []string
	for _, in := range append(append([]instruction(nil), catalogue...), distractors...) {
		if in.component == component {
			space = append(space, in.text)
		}
	}
	return appendInstruction(text, space[r.rng.IntN(len(space))]), nil
}

func appendInstruction(text, ins string) string {
	text = strings.TrimSpace(strings.ReplaceAll(text, ins, ""))
	text = strings.Join(strings.Fields(text), " ")
	return strings.TrimSpace(text + " " + ins)
}

func sortedStrings(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var taskSeed = gepa.Candidate{"system": "You are Alicia.", "voice_style": "Be warm."}

// taskSet deals n questions per kind, in a fixed order.
func taskSet(prefix string, counts map[string]int) []question {
	var qs []question
	for _, k := range []string{"plain", "units", "brief", "steps", "cite", "slow", "names"} {
		for i := 0; i < counts[k]; i++ {
			qs = append(qs, question{ID: fmt.Sprintf("%s-%s-%d", prefix, k, i), Kind: k})
		}
	}
	return qs
}

var (
	taskCounts = map[string]int{"plain": 4, "units": 6, "brief": 8, "steps": 5, "cite": 5, "slow": 6, "names": 6}
	taskTrain  = taskSet("train", taskCounts)
	taskVal    = taskSet("val", taskCounts)
)

// bestAchievable is the best validation mean over every prompt the
// proposal space can write: any subset of each component's instructions,
// in any order, after the seed text.
func bestAchievable(val []question) (float64, gepa.Candidate) {
	texts := map[string][]string{}
	for _, in := range append(append([]instruction(nil), catalogue...), distractors...) {
		texts[in.component] = append(texts[in.component], in.text)
	}
	best, arg := -1.0, gepa.Candidate(nil)
	for _, sys := range orderings(texts["system"]) {
		for _, voice := range orderings(texts["voice_style"]) {
			c := gepa.Candidate{"system": strings.TrimSpace(taskSeed["system"] + " " + sys), "voice_style": strings.TrimSpace(taskSeed["voice_style"] + " " + voice)}
			ok := 0
			for _, q := range val {
				if good, _ := answers(c, q.Kind); good {
					ok++
				}
			}
			if m := float64(ok) / float64(len(val)); m > best {
				best, arg = m, c
			}
		}
	}
	return best, arg
}

// orderings returns every ordered selection of xs joined by spaces.
func orderings(xs []string) []string {
	out := []string{""}
	var rec func(prefix []string, used []bool)
	rec = func(prefix []string, used []bool) {
		for i, x := range xs {
			if used[i] {
				continue
			}
			used[i] = true
			p := append(append([]string(nil), prefix...), x)
			out = append(out, strings.Join(p, " "))
			rec(p, used)
			used[i] = false
		}
	}
	rec(nil, make([]bool, len(xs)))
	return out
}

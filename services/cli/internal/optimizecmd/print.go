package optimizecmd

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// Dimensions are the dimensions a run weighs, in the order they are
// printed (the gateway's list; others it may add come after, by name).
var Dimensions = []string{"correctness", "faithfulness", "relevancy", "userFeedback", "brevity", "latency"}

// dimensionsOf orders the dimensions of m: the known ones first.
func dimensionsOf(m map[string]float64) []string {
	var out []string
	for _, d := range Dimensions {
		if _, ok := m[d]; ok {
			out = append(out, d)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(Dimensions, d) {
			out = append(out, d)
		}
	}
	return out
}

// scores prints m as "correctness 0.90  brevity 1.00".
func scores(m map[string]float64) string {
	if len(m) == 0 {
		return "none yet"
	}
	parts := make([]string, 0, len(m))
	for _, d := range dimensionsOf(m) {
		parts = append(parts, fmt.Sprintf("%s %.2f", style.Printable(d), m[d]))
	}
	return strings.Join(parts, "  ")
}

// weights prints a run's or scope's weights ("equal weights" when none).
func weights(m map[string]float64) string {
	if len(m) == 0 {
		return "every dimension equally"
	}
	parts := make([]string, 0, len(m))
	for _, d := range dimensionsOf(m) {
		parts = append(parts, style.Printable(d)+" "+number(m[d]))
	}
	return strings.Join(parts, ", ")
}

func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func components(cs []string) string {
	if len(cs) == 0 {
		return "system, voice_style"
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = style.Printable(c)
	}
	return strings.Join(out, ", ")
}

func scopeOf(r api.OptimizationRun) string {
	if r.Scope == "installation" {
		return "installation"
	}
	return "mine"
}

func stamp(ms int64) string { return time.UnixMilli(ms).Format("2006-01-02 15:04:05") }

// progress is one line of a run's state, as watch prints it.
func progress(r api.OptimizationRun) string {
	switch r.Status {
	case "queued":
		return "queued: waiting for an optimiser (an llm replica with ALICIA_OPTIMIZER on)"
	case "failed":
		why := "no reason given"
		if r.Error != nil {
			why = oneLine(style.Printable(*r.Error))
		}
		return "failed: " + why
	}
	return fmt.Sprintf("%s: iteration %d, %d/%d metric calls, front %d, best %s", style.Printable(r.Status), r.Iteration,
		r.MetricCalls, r.Budget, r.FrontSize, scores(r.BestScores))
}

// Describe prints a run whole: what it is, its progress and its elites.
func Describe(out io.Writer, r api.OptimizationRun) error {
	p := &printer{w: out}
	p.f("Run %s (%s): %s\n", style.Printable(r.ID), scopeOf(r), style.Printable(r.Status))
	p.f("  components: %s\n", components(r.Components))
	p.f("  weights:    %s\n", weights(r.Weights))
	p.f("  budget:     %d metric calls, %d spent\n", r.Budget, r.MetricCalls)
	times := "created " + stamp(r.CreatedAt)
	if r.StartedAt != nil {
		times += ", started " + stamp(*r.StartedAt)
	}
	if r.FinishedAt != nil {
		times += ", ended " + stamp(*r.FinishedAt)
	}
	p.f("  when:       %s\n", times)
	if r.Status != "queued" {
		p.f("  progress:   iteration %d, Pareto front of %d\n", r.Iteration, r.FrontSize)
		p.f("  best:       %s\n", scores(r.BestScores))
	}
	if r.Error != nil {
		p.block("  why:        ", style.Printable(*r.Error))
	}
	switch {
	case len(r.Elites) > 0:
		p.f("\nElites, best first (promote one: alicia optimize promote %s <candidate> [--share 0.5]):\n", style.Printable(r.ID))
		for i, e := range r.Elites {
			p.elite(i+1, e)
		}
	case r.Status == "done" || r.Status == "cancelled":
		p.f("\nNo elites: nothing it tried did better than what serves now.\n")
	}
	return p.err
}

// printer writes and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// block prints text after label, its further lines indented under the
// first (text is already printable).
func (p *printer) block(label, text string) {
	pad := strings.Repeat(" ", len([]rune(label)))
	for i, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if i == 0 {
			p.f("%s%s\n", label, line)
		} else {
			p.f("%s%s\n", pad, line)
		}
	}
}

func (p *printer) elite(n int, e api.Elite) {
	head := fmt.Sprintf("\n%d. %s", n, style.Printable(e.CandidateID))
	if e.Weighted != nil {
		head += fmt.Sprintf("  weighted %.2f", *e.Weighted)
	}
	if e.BestOn != nil {
		head += fmt.Sprintf("  best on %d example(s)", *e.BestOn)
	}
	if e.OnFront != nil && *e.OnFront {
		head += "  on the front"
	}
	p.f("%s\n", head)
	if e.PromotedAt != nil {
		ids := make([]string, len(e.PromotedVersionIds))
		for i, id := range e.PromotedVersionIds {
			ids[i] = style.Printable(id)
		}
		p.f("   promoted %s as %s\n", stamp(*e.PromotedAt), strings.Join(ids, ", "))
	}
	p.f("   scores: %s\n", scores(e.Scores))
	if len(e.Components) == 0 {
		p.f("   changes nothing: what serves now\n")
	}
	for _, c := range slices.Sorted(maps.Keys(e.Components)) {
		p.f("   %s:\n", style.Printable(c))
		for _, line := range strings.Split(strings.TrimRight(style.Printable(e.Components[c]), "\n"), "\n") {
			p.f("     │ %s\n", line)
		}
	}
	for _, x := range e.Examples {
		p.f("   example %s\n", style.Printable(x.MessageID))
		p.block("     asked:     ", style.Printable(x.Question))
		p.block("     today:     ", style.Printable(x.Current))
		p.block("     candidate: ", style.Printable(x.Candidate))
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

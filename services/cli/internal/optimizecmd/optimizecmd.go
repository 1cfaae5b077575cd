// Package optimizecmd implements `alicia optimize`: a scope's dimension
// weights, the opt-in to installation-wide runs, and prompt optimisation
// runs (start, list, show, watch, cancel), the promotion of an elite and
// its rollback, over the gateway's REST API (/v1/optimize, services/gateway/API.md,
// "Prompt optimisation").
package optimizecmd

import (
	"context"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/promptcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// CheckScope refuses a scope other than mine and installation before
// anything is sent.
func CheckScope(scope string) error {
	switch scope {
	case "mine", "installation":
		return nil
	}
	return fmt.Errorf("--scope %q: use mine (your own answers) or installation (everyone's; administrators)", scope)
}

// explain adds what to do to the gateway's refusals; the *api.Error stays
// in the chain.
func explain(err error, run string) error {
	switch api.StatusOf(err) {
	case http.StatusForbidden:
		return fmt.Errorf("%w\n(the installation's scope is for administrators, the users in the gateway's ALICIA_ADMIN_USERS; yours is --scope mine)", err)
	case http.StatusNotFound:
		if run != "" {
			return fmt.Errorf("%w\n(`alicia optimize list` shows your runs and `alicia optimize show %s` its candidates)", err, style.Printable(run))
		}
	}
	return err
}

// ParseWeights reads --set: dimension=weight pairs separated by commas,
// each weight between 0 and 1. The dimensions' names are the gateway's to
// check.
func ParseWeights(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" {
			return nil, fmt.Errorf("--set %q: want dimension=weight pairs such as correctness=1,brevity=0.5 (dimensions: %s)", pair, strings.Join(Dimensions, ", "))
		}
		w, err := strconv.ParseFloat(value, 64)
		if err != nil || !(w >= 0 && w <= 1) { // NaN fails too
			return nil, fmt.Errorf("--set %s: the weight %q must be a number from 0 to 1", name, value)
		}
		if _, twice := out[name]; twice {
			return nil, fmt.Errorf("--set names %s twice", name)
		}
		out[name] = w
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--set is empty: give dimension=weight pairs such as correctness=1,brevity=0.5")
	}
	return out, nil
}

// Prefs prints the dimension weights of scope; with set (ParseWeights),
// it first changes those dimensions, keeping the others' weights.
func Prefs(ctx context.Context, c *api.Client, scope string, set map[string]float64, asJSON bool, out io.Writer) error {
	p, err := c.OptimizePreferences(ctx, scope)
	if err != nil {
		return explain(err, "")
	}
	if set != nil {
		w := map[string]float64{}
		for d, v := range p.Weights {
			w[d] = v
		}
		for d, v := range set {
			w[d] = v
		}
		if p, err = c.SetOptimizePreferences(ctx, scope, w); err != nil {
			return explain(err, "")
		}
	}
	if asJSON {
		return writeJSON(out, p)
	}
	when := "never set: the defaults"
	if p.UpdatedAt != nil {
		when = "set " + stamp(*p.UpdatedAt)
	}
	fmt.Fprintf(out, "Dimension weights (%s, %s):\n", style.Printable(p.Scope), when)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, d := range dimensionsOf(p.Weights) {
		fmt.Fprintf(tw, "  %s\t%s\n", style.Printable(d), number(p.Weights[d]))
	}
	return tw.Flush()
}

// Share handles `share on|off|status`: whether installation-wide runs may
// learn from the caller's conversations.
func Share(ctx context.Context, c *api.Client, what string, out io.Writer) error {
	var share bool
	var err error
	switch what {
	case "", "status":
		share, err = c.OptimizeSharing(ctx)
	case "on", "off":
		share, err = c.SetOptimizeSharing(ctx, what == "on")
	default:
		return fmt.Errorf("share %q: use on, off or status", what)
	}
	if err != nil {
		return err
	}
	if share {
		_, err = fmt.Fprintln(out, "Sharing: on. Installation-wide runs (an administrator's) may learn from your conversations.")
	} else {
		_, err = fmt.Fprintln(out, "Sharing: off. Installation-wide runs do not learn from your conversations; your own runs still do.")
	}
	return err
}

// StartOptions are what `optimize start` asks for.
type StartOptions struct {
	Scope      string
	Components []string // nil: the gateway's default (system and voice_style)
	Budget     int      // metric calls, 1..100000
}

// Start queues a run and says how to follow it.
func Start(ctx context.Context, c *api.Client, o StartOptions, out io.Writer) (api.OptimizationRun, error) {
	if o.Budget < 1 || o.Budget > 100000 {
		return api.OptimizationRun{}, fmt.Errorf("--budget %d: give 1 to 100000 metric calls (one stored answer replayed and judged is one)", o.Budget)
	}
	r, err := c.StartOptimizationRun(ctx, o.Scope, o.Components, int32(o.Budget))
	if err != nil {
		return r, explain(err, "")
	}
	fmt.Fprintf(out, "Run %s %s (%s): improves %s within %d metric calls, weighing %s.\n", style.Printable(r.ID), style.Printable(r.Status),
		scopeOf(r), components(r.Components), r.Budget, weights(r.Weights))
	_, err = fmt.Fprintf(out, "Follow it: alicia optimize watch %s\n", style.Printable(r.ID))
	return r, err
}

// List prints the runs of scope, newest first.
func List(ctx context.Context, c *api.Client, scope string, asJSON bool, out io.Writer) error {
	runs, err := c.ListOptimizationRuns(ctx, scope)
	if err != nil {
		return explain(err, "")
	}
	if asJSON {
		return writeJSON(out, runs)
	}
	if len(runs) == 0 {
		_, err := fmt.Fprintf(out, "No optimisation runs (%s) yet: start one with `alicia optimize start --budget 50`.\n", scope)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tCOMPONENTS\tMETRIC CALLS\tFRONT\tCREATED\tNOTE")
	for _, r := range runs {
		note := ""
		if r.Error != nil {
			note = clip(oneLine(style.Printable(*r.Error)), 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", style.Printable(r.ID), style.Printable(r.Status), components(r.Components),
			r.MetricCalls, r.Budget, r.FrontSize, stamp(r.CreatedAt), note)
	}
	return tw.Flush()
}

// Show prints run id: its progress and its elites, each with its scores
// per dimension, the texts it changes and its example answers beside
// today's.
func Show(ctx context.Context, c *api.Client, id string, asJSON bool, out io.Writer) error {
	r, err := c.OptimizationRun(ctx, id)
	if err != nil {
		return explain(err, id)
	}
	if asJSON {
		return writeJSON(out, r)
	}
	return Describe(out, r)
}

// Ended reports whether a run's status is final.
func Ended(status string) bool {
	return status == "done" || status == "failed" || status == "cancelled"
}

// Watch prints run id's progress whenever it moves, polling every every,
// until the run ends (then it is shown whole) or ctx ends: the run then
// goes on, and Watch says so and returns nil.
func Watch(ctx context.Context, c *api.Client, id string, every time.Duration, out io.Writer) error {
	t := time.NewTicker(every)
	defer t.Stop()
	last := ""
	for {
		r, err := c.OptimizationRun(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return stoppedWatching(out, id)
			}
			return explain(err, id)
		}
		if line := progress(r); line != last {
			fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
		if Ended(r.Status) {
			fmt.Fprintln(out)
			return Describe(out, r)
		}
		select {
		case <-ctx.Done():
			return stoppedWatching(out, id)
		case <-t.C:
		}
	}
}

func stoppedWatching(out io.Writer, id string) error {
	id = style.Printable(id)
	_, err := fmt.Fprintf(out, "Stopped watching; run %s goes on (`alicia optimize watch %s` to follow it again, `alicia optimize cancel %s` to stop it).\n", id, id, id)
	return err
}

// Cancel cancels run id and says where it stands.
func Cancel(ctx context.Context, c *api.Client, id string, out io.Writer) error {
	r, err := c.CancelOptimizationRun(ctx, id)
	if err != nil {
		return explain(err, id)
	}
	if r.Status == "cancelled" {
		_, err = fmt.Fprintf(out, "Run %s cancelled; nothing it found serves unless you promote it.\n", style.Printable(r.ID))
		return err
	}
	_, err = fmt.Fprintf(out, "Run %s is %s: the optimiser was told to stop it and records it cancelled when it does (`alicia optimize watch %s`).\n",
		style.Printable(r.ID), style.Printable(r.Status), style.Printable(r.ID))
	return err
}

// Promote makes a run's candidate serve all new conversations (share nil)
// or that share of them, and says how to undo it.
func Promote(ctx context.Context, c *api.Client, run, candidate string, share *float64, out io.Writer) error {
	if share != nil && (*share <= 0 || *share > 1) {
		return fmt.Errorf("--share must be above 0 and at most 1, not %g", *share)
	}
	vs, err := c.SelectElite(ctx, run, candidate, share)
	if err != nil {
		return explain(err, run)
	}
	for _, v := range vs {
		who := "all new conversations"
		if v.RolloutShare != nil {
			who = fmt.Sprintf("%.0f%% of new conversations (the others keep the version it replaces)", *v.RolloutShare*100)
		}
		scope := ""
		if v.UserID == nil {
			scope = " --scope installation"
		}
		fmt.Fprintf(out, "%s (%s version %d) now serves %s; undo: alicia optimize rollback %s%s\n", style.Printable(v.ID),
			style.Printable(v.Component), v.Version, who, style.Printable(v.Component), scope)
	}
	return nil
}

// Rollback undoes the last promotion of component in scope
// (POST /v1/prompt-versions/rollback, as `alicia prompts rollback`).
func Rollback(ctx context.Context, c *api.Client, component, scope string, out io.Writer) error {
	return explain(promptcmd.Rollback(ctx, c, component, scope, out), "")
}

func writeJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

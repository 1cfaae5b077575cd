// Package promptcmd implements `alicia prompts`: list, promote and roll
// back the versions of a prompt component over the gateway's REST API
// (/v1/prompt-versions).
package promptcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// Scope names a scope: the caller's own versions, or the installation's.
func Scope(installation bool) string {
	if installation {
		return "installation"
	}
	return "mine"
}

// List prints the versions of component in scope, newest first: status,
// share while rolling out, the answers each shaped and their votes.
func List(ctx context.Context, c *api.Client, component, scope string, asJSON bool, out io.Writer) error {
	vs, err := c.ListPromptVersions(ctx, component, scope)
	if err != nil {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(vs, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	if len(vs) == 0 {
		_, err := fmt.Fprintf(out, "No versions of %s (%s): the built-in text serves.\n", component, scope)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tV\tSTATUS\tANSWERS\tUP\tDOWN\tBY\tCREATED\tTEXT")
	for _, v := range vs {
		status := v.Status
		if v.RolloutShare != nil {
			status += fmt.Sprintf(" (%.0f%%)", *v.RolloutShare*100)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", v.ID, v.Version, status, v.Answers, v.UpVotes, v.DownVotes,
			style.Printable(v.CreatedBy), time.UnixMilli(v.CreatedAt).Format("2006-01-02 15:04"), clip(style.Printable(oneLine(v.Text)), 60))
	}
	return tw.Flush()
}

// Promote makes version id serve all new conversations (share nil) or a
// share of them, and says so.
func Promote(ctx context.Context, c *api.Client, id string, share *float64, out io.Writer) error {
	if share != nil && (*share <= 0 || *share > 1) {
		return fmt.Errorf("--share must be above 0 and at most 1, not %g", *share)
	}
	v, err := c.PromotePromptVersion(ctx, id, share)
	if err != nil {
		return err
	}
	who := "all new conversations"
	if v.RolloutShare != nil {
		who = fmt.Sprintf("%.0f%% of new conversations (the others keep the version it replaces)", *v.RolloutShare*100)
	}
	_, err = fmt.Fprintf(out, "%s (%s version %d) now serves %s.\n", v.ID, v.Component, v.Version, who)
	return err
}

// Rollback undoes the last promotion of component in scope and says what
// serves now.
func Rollback(ctx context.Context, c *api.Client, component, scope string, out io.Writer) error {
	serving, err := c.RollbackPromptVersion(ctx, component, scope)
	if err != nil {
		return err
	}
	if serving == "" {
		_, err = fmt.Fprintf(out, "Rolled back: no %s version of yours serves now; the installation's does.\n", component)
		return err
	}
	_, err = fmt.Fprintf(out, "Rolled back: %s serves %s (%s) again.\n", serving, component, scope)
	return err
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

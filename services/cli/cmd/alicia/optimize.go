package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/optimizecmd"
)

// watchEvery is how often `optimize watch` asks how a run is doing.
const watchEvery = 2 * time.Second

// optimizeCommand is `alicia optimize`: what the web's "Improve Alicia"
// page does, from the terminal.
func optimizeCommand() *cobra.Command {
	o := &cobra.Command{Use: "optimize", Short: "Improve Alicia's prompts from your feedback: dimension weights, optimisation runs, their elites, promotion and rollback"}

	// sub builds a subcommand that talks to the gateway; run gets a client.
	sub := func(use, short string, args cobra.PositionalArgs, run func(c *cobra.Command, client *api.Client, args []string) error) *cobra.Command {
		var g gatewayFlags
		cmd := &cobra.Command{Use: use, Short: short, Args: args,
			RunE: func(c *cobra.Command, args []string) error {
				client, err := g.client()
				if err != nil {
					return err
				}
				return run(c, client, args)
			}}
		g.add(cmd)
		return cmd
	}
	scopeFlag := func(cmd *cobra.Command, scope *string) {
		cmd.Flags().StringVar(scope, "scope", "mine", "mine (your own answers) or installation (everyone's; administrators)")
	}

	var prefScope, set string
	var prefJSON bool
	prefs := sub("prefs", "Show the dimension weights of a scope, or change some with --set", cobra.NoArgs,
		func(c *cobra.Command, client *api.Client, _ []string) error {
			if err := optimizecmd.CheckScope(prefScope); err != nil {
				return err
			}
			var w map[string]float64
			if c.Flags().Changed("set") {
				var err error
				if w, err = optimizecmd.ParseWeights(set); err != nil {
					return err
				}
			}
			return optimizecmd.Prefs(c.Context(), client, prefScope, w, prefJSON, c.OutOrStdout())
		})
	scopeFlag(prefs, &prefScope)
	prefs.Flags().StringVar(&set, "set", "", "weights to change, 0..1, e.g. correctness=1,brevity=0.5 (the others keep theirs); dimensions: correctness, faithfulness, relevancy, userFeedback, brevity, latency")
	prefs.Flags().BoolVar(&prefJSON, "json", false, "the API's JSON")

	share := sub("share on|off|status", "Let installation-wide runs learn from your conversations (on), or not (off)", cobra.MaximumNArgs(1),
		func(c *cobra.Command, client *api.Client, args []string) error {
			what := "status"
			if len(args) == 1 {
				what = args[0]
			}
			return optimizecmd.Share(c.Context(), client, what, c.OutOrStdout())
		})

	var so optimizecmd.StartOptions
	var watch bool
	start := sub("start", "Start a run: it replays your stored answers with candidate prompts and keeps the best (it changes nothing until you promote one)", cobra.NoArgs,
		func(c *cobra.Command, client *api.Client, _ []string) error {
			if err := optimizecmd.CheckScope(so.Scope); err != nil {
				return err
			}
			r, err := optimizecmd.Start(c.Context(), client, so, c.OutOrStdout())
			if err != nil || !watch {
				return err
			}
			return optimizecmd.Watch(c.Context(), client, r.ID, watchEvery, c.OutOrStdout())
		})
	scopeFlag(start, &so.Scope)
	start.Flags().StringSliceVar(&so.Components, "components", nil, "the components to improve: system, voice_style, demonstrations, tool:<name> (default system,voice_style)")
	start.Flags().IntVar(&so.Budget, "budget", 0, "metric calls the run may spend, 1..100000 (one stored answer replayed and judged is one; required)")
	_ = start.MarkFlagRequired("budget")
	start.Flags().BoolVar(&watch, "watch", false, "follow the run until it ends (Ctrl-C stops watching, not the run)")

	var listScope string
	var listJSON bool
	list := sub("list", "The runs of a scope, newest first", cobra.NoArgs,
		func(c *cobra.Command, client *api.Client, _ []string) error {
			if err := optimizecmd.CheckScope(listScope); err != nil {
				return err
			}
			return optimizecmd.List(c.Context(), client, listScope, listJSON, c.OutOrStdout())
		})
	scopeFlag(list, &listScope)
	list.Flags().BoolVar(&listJSON, "json", false, "the API's JSON")

	var showJSON bool
	show := sub("show <run>", "A run's progress and its elites: scores per dimension, the texts they change, example answers beside today's", cobra.ExactArgs(1),
		func(c *cobra.Command, client *api.Client, args []string) error {
			return optimizecmd.Show(c.Context(), client, args[0], showJSON, c.OutOrStdout())
		})
	show.Flags().BoolVar(&showJSON, "json", false, "the API's JSON")

	watchCmd := sub("watch <run>", "Follow a run until it ends (Ctrl-C stops watching; the run goes on)", cobra.ExactArgs(1),
		func(c *cobra.Command, client *api.Client, args []string) error {
			return optimizecmd.Watch(c.Context(), client, args[0], watchEvery, c.OutOrStdout())
		})

	cancel := sub("cancel <run>", "Cancel a queued or running run", cobra.ExactArgs(1),
		func(c *cobra.Command, client *api.Client, args []string) error {
			return optimizecmd.Cancel(c.Context(), client, args[0], c.OutOrStdout())
		})

	var shareOf float64
	promote := sub("promote <run> <candidate>", "Serve an elite's texts to new conversations (all, or --share of them)", cobra.ExactArgs(2),
		func(c *cobra.Command, client *api.Client, args []string) error {
			var s *float64
			if c.Flags().Changed("share") {
				s = &shareOf
			}
			return optimizecmd.Promote(c.Context(), client, args[0], args[1], s, c.OutOrStdout())
		})
	promote.Flags().Float64Var(&shareOf, "share", 1, "the share of new conversations it serves while rolling out (0..1]")

	var rbScope string
	rollback := sub("rollback <component>", "Undo the last promotion of a component (as `alicia prompts rollback`)", cobra.ExactArgs(1),
		func(c *cobra.Command, client *api.Client, args []string) error {
			if err := optimizecmd.CheckScope(rbScope); err != nil {
				return err
			}
			return optimizecmd.Rollback(c.Context(), client, args[0], rbScope, c.OutOrStdout())
		})
	scopeFlag(rollback, &rbScope)

	o.AddCommand(prefs, share, start, list, show, watchCmd, cancel, promote, rollback)
	return o
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/services/cli/internal/promptcmd"
)

// promptsCommand is `alicia prompts`: the versions of a prompt component.
func promptsCommand() *cobra.Command {
	p := &cobra.Command{Use: "prompts", Short: "List, promote and roll back the versions of a prompt component (system, voice_style, memory_extraction, demonstrations, tool:<name>)"}
	var lg, pg, rg gatewayFlags
	var component string
	var installation, asJSON bool
	list := &cobra.Command{Use: "list", Short: "The versions of a component, newest first, with the answers each shaped and their votes", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := lg.client()
			if err != nil {
				return err
			}
			return promptcmd.List(c.Context(), client, component, promptcmd.Scope(installation), asJSON, c.OutOrStdout())
		}}
	lg.add(list)
	list.Flags().StringVar(&component, "component", "system", "the component")
	list.Flags().BoolVar(&installation, "installation", false, "the installation's versions (default: your own)")
	list.Flags().BoolVar(&asJSON, "json", false, "the API's JSON")

	var share float64
	promote := &cobra.Command{Use: "promote <version>", Short: "Serve a version to new conversations (all, or --share of them)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := pg.client()
			if err != nil {
				return err
			}
			var s *float64
			if c.Flags().Changed("share") {
				s = &share
			}
			return promptcmd.Promote(c.Context(), client, args[0], s, c.OutOrStdout())
		}}
	pg.add(promote)
	promote.Flags().Float64Var(&share, "share", 1, "the share of new conversations it serves while rolling out (0..1]")

	var rcomponent string
	var rinstallation bool
	rollback := &cobra.Command{Use: "rollback", Short: "Undo the last promotion of a component", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := rg.client()
			if err != nil {
				return err
			}
			return promptcmd.Rollback(c.Context(), client, rcomponent, promptcmd.Scope(rinstallation), c.OutOrStdout())
		}}
	rg.add(rollback)
	rollback.Flags().StringVar(&rcomponent, "component", "system", "the component")
	rollback.Flags().BoolVar(&rinstallation, "installation", false, "the installation's (administrators; default: your own)")

	p.AddCommand(list, promote, rollback)
	return p
}

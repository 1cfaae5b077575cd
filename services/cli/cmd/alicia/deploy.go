package main

import (
	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/services/cli/deploycmd"
)

func deployCommand() *cobra.Command {
	d := &cobra.Command{Use: "deploy", Short: "Prepare the docker compose deployment (deploy/README.md)"}
	var dir string
	initSecrets := &cobra.Command{Use: "init-secrets",
		Short: "Write the missing secret files of docker-compose.yml with random values (never replaces one)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return deploycmd.InitSecrets(deploycmd.Options{Dir: dir, Out: c.OutOrStdout()})
		}}
	initSecrets.Flags().StringVar(&dir, "dir", deploycmd.DefaultSecretsDir, "directory of the secret files")
	d.AddCommand(initSecrets)
	return d
}

package main

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/cli/internal/backupcmd"
)

// backupCommands are `alicia backup` and `alicia restore` (deploy/README.md, Backup and restore).
func backupCommands() []*cobra.Command {
	var dir string
	backup := &cobra.Command{Use: "backup",
		Short: "Save the database and the JetStream streams together, the database first (ALICIA_POSTGRES_URL, ALICIA_NATS_URL as admin)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			log, err := cliLog()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			cfg, err := backupcmd.ConfigFromEnv()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			pgURL, err := localpg.Ensure(c.Context(), localpg.Options{Log: c.ErrOrStderr()})
			if err != nil {
				return err
			}
			nc, err := cfg.Connect("backup")
			if err != nil {
				return err
			}
			defer nc.Close()
			path, err := backupcmd.Backup(c.Context(), backupcmd.Options{NATS: nc, PostgresURL: pgURL, Log: log}, dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), path)
			return nil
		}}
	backup.Flags().StringVar(&dir, "dir", ".", "directory to write the backup into (as alicia-backup-<UTC time>/)")

	var ro backupcmd.RestoreOptions
	var only string
	restore := &cobra.Command{Use: "restore <backup directory>",
		Short: "Put a backup back, streams then database, refusing any order that leaves the database ahead of its streams (stop the services first)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			log, err := cliLog()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			cfg, err := backupcmd.ConfigFromEnv()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			if ro.PostgresURL, err = localpg.Ensure(c.Context(), localpg.Options{Log: c.ErrOrStderr()}); err != nil {
				return err
			}
			nc, err := cfg.Connect("restore")
			if err != nil {
				return err
			}
			defer nc.Close()
			ro.NATS, ro.Roles, ro.Replicas, ro.Only, ro.Log = nc, cfg.Roles, cfg.Replicas, backupcmd.Part(only), log
			if err := backupcmd.Restore(c.Context(), ro, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "restored %s; start the services (docker compose up -d: the migrate job applies the migrations newer than the backup's)\n", args[0])
			return nil
		}}
	restore.Flags().BoolVar(&ro.Replace, "replace", false, "drop the database's schema and the Alicia streams there are before restoring")
	restore.Flags().StringVar(&only, "only", "", "restore only postgres or jetstream, under the other part as it is")
	return []*cobra.Command{backup, restore}
}

// cliLog is the log of the commands that report progress: on stderr, in
// ALICIA_LOG_FORMAT and ALICIA_LOG_LEVEL as the services'.
func cliLog() (zerolog.Logger, error) {
	c, err := telemetry.LogConfigFromEnv()
	return c.Logger(os.Stderr), err
}

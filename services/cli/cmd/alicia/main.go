// Command alicia is Alicia's command-line tool: chat and conversations, envelopes, migrations
// and the local dev stack.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/alicia-voice/alicia/pkg/jaeger"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/services/cli/internal/devcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/envelopecmd"
	"github.com/alicia-voice/alicia/services/cli/internal/migratecmd"
	"github.com/alicia-voice/alicia/services/cli/internal/opnats"
	"github.com/alicia-voice/alicia/services/cli/internal/replaycmd"
	"github.com/alicia-voice/alicia/services/cli/internal/upcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root(stop).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "alicia:", err)
		os.Exit(1)
	}
}

// root builds the command tree; stopSignals ends the default Ctrl-C handling
// (cancel everything) for a command that handles Ctrl-C itself.
func root(stopSignals func()) *cobra.Command {
	r := &cobra.Command{Use: "alicia", Short: "Alicia voice assistant tool", SilenceUsage: true, SilenceErrors: true}

	env := &cobra.Command{Use: "envelope", Short: "Convert protocol envelopes between MessagePack and JSON"}
	env.AddCommand(
		&cobra.Command{Use: "decode", Short: "MessagePack envelope on stdin → JSON on stdout", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return envelopecmd.Decode(c.InOrStdin(), c.OutOrStdout()) }},
		&cobra.Command{Use: "encode", Short: "JSON envelope on stdin → canonical MessagePack on stdout", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return envelopecmd.Encode(c.InOrStdin(), c.OutOrStdout()) }},
	)

	mig := &cobra.Command{Use: "migrate", Short: "Apply or inspect database migrations (ALICIA_POSTGRES_URL, else the local dev Postgres)"}
	for _, dir := range []string{"up", "down", "status"} {
		mig.AddCommand(&cobra.Command{Use: dir, Short: "migrate " + dir, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				return migratecmd.Run(c.Context(), dir, c.OutOrStdout(), c.ErrOrStderr())
			}})
	}

	dev := &cobra.Command{Use: "dev", Short: "Local development helpers: private Postgres, livekit-server, fake models (try Alicia without a GPU)"}
	dev.AddCommand(&cobra.Command{Use: "postgres", Short: "Start (or reuse) the private Postgres+pgvector and print its URL", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return devcmd.PostgresURL(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}})
	dev.AddCommand(&cobra.Command{Use: "livekit-install", Short: "Install livekit-server " + livekitserver.Version + " into ~/.cache/alicia/bin unless it is found, and print its path", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return devcmd.LiveKitInstall(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}})

	dev.AddCommand(&cobra.Command{Use: "jaeger-install", Short: "Build Jaeger " + jaeger.Version + " (what `alicia up --traces` runs) into ~/.cache/alicia/bin unless it is there, and print its path", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return devcmd.JaegerInstall(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}})

	dev.AddCommand(fakeModelsCommand())

	var traces bool
	up := &cobra.Command{Use: "up", Short: "Run the local stack in the foreground (NATS, Postgres, LiveKit, services; Jaeger with --traces)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := upcmd.ConfigFromEnv()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			if c.Flags().Changed("traces") {
				cfg.Traces.Jaeger = traces
			}
			return upcmd.Run(c.Context(), cfg, c.OutOrStdout(), c.ErrOrStderr())
		}}
	up.Flags().BoolVar(&traces, "traces", false, "run Jaeger "+jaeger.Version+" on 127.0.0.1 (built from its Go module into ~/.cache/alicia/bin the first time, ~6 min), "+
		"export every service's spans to it and print its URL (ALICIA_TRACES=true; ports: ALICIA_JAEGER_UI_PORT, ALICIA_JAEGER_OTLP_GRPC_PORT, ALICIA_JAEGER_OTLP_HTTP_PORT)")

	var ro replaycmd.Options
	replay := &cobra.Command{Use: "replay <conversation>", Short: "Print a conversation's timeline from JetStream (ALICIA_NATS_URL; as the admin user: ALICIA_NATS_USER/ALICIA_NATS_PASSWORD(_FILE), else the admin URL `alicia up` wrote)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := opnats.FromEnv()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			nc, err := cfg.Connect("replay")
			if err != nil {
				return err
			}
			defer nc.Close()
			ro.ConversationID = args[0]
			return replaycmd.Run(c.Context(), nc, ro, c.OutOrStdout())
		}}
	replay.Flags().BoolVar(&ro.JSON, "json", false, "one JSON object per envelope")
	replay.Flags().BoolVar(&ro.Follow, "follow", false, "keep printing new envelopes")
	replay.Flags().Int32Var(&ro.FromStanza, "from", 0, "start after this server stanza id (negative)")

	r.AddCommand(env, mig, dev, up, replay, chatCommand(stopSignals), deployCommand())
	r.AddCommand(conversationCommands()...)
	r.AddCommand(promptsCommand(), optimizeCommand())
	r.AddCommand(backupCommands()...)
	return r
}

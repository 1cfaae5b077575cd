// Package upcmd implements `alicia up`: the local stack in the foreground.
package upcmd

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/services/persistence"
)

// Config of the local stack, from ALICIA_* env vars.
type Config struct {
	NATSURL string // ALICIA_NATS_URL, default nats://127.0.0.1:4222
	DataDir string // ALICIA_DATA_DIR, default ~/.local/share/alicia
}

// ConfigFromEnv reads the environment.
func ConfigFromEnv() Config {
	c := Config{NATSURL: os.Getenv("ALICIA_NATS_URL"), DataDir: os.Getenv("ALICIA_DATA_DIR")}
	if c.NATSURL == "" {
		c.NATSURL = "nats://127.0.0.1:4222"
	}
	if c.DataDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		c.DataDir = filepath.Join(home, ".local", "share", "alicia")
	}
	return c
}

// Run starts embedded NATS (JetStream, fsync on every write), the private
// Postgres unless ALICIA_POSTGRES_URL is set, and the services, then blocks
// until ctx is cancelled and stops them cleanly.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr}).With().Timestamp().Logger()
	ns, err := natsserver.Start(natsserver.Options{URL: cfg.NATSURL, StoreDir: filepath.Join(cfg.DataDir, "jetstream")})
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	pgURL, err := localpg.Ensure(ctx, localpg.Options{Log: stderr})
	if err != nil {
		return err
	}
	pcfg := persistence.DefaultConfig()
	pcfg.NATSURL, pcfg.PostgresURL = cfg.NATSURL, pgURL
	fmt.Fprintf(stdout, "Alicia is up\n  NATS:     %s (JetStream store %s)\n  Postgres: %s\nCtrl-C stops.\n", cfg.NATSURL, filepath.Join(cfg.DataDir, "jetstream"), redact(pgURL))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return persistence.Run(gctx, pcfg, log.With().Str("service", "persistence").Logger()) })
	err = g.Wait()
	fmt.Fprintln(stdout, "Alicia stopped")
	return err
}

// redact hides the password of a postgres:// URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

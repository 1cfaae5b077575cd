// Command persistence runs Alicia's persistence service alone.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/persistence"
)

func main() {
	log := telemetry.NewLogger("persistence")
	cfg, err := persistence.ConfigFromEnv()
	if err != nil {
		log.Fatal().Err(err).Msg("configuration")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := persistence.Run(ctx, cfg, log); err != nil {
		log.Fatal().Err(err).Msg("persistence stopped")
	}
}

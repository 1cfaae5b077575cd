// Command memory runs Alicia's memory service alone.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/memory"
)

func main() {
	log := telemetry.NewLogger("memory")
	cfg, err := memory.ConfigFromEnv()
	if err != nil {
		log.Fatal().Err(err).Msg("configuration")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := memory.Run(ctx, cfg, log); err != nil {
		log.Fatal().Err(err).Msg("memory stopped")
	}
}

// Command gateway runs Alicia's HTTP and WebSocket edge alone.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/gateway"
)

func main() {
	log := telemetry.NewLogger("gateway")
	cfg, err := gateway.ConfigFromEnv()
	if err != nil {
		log.Fatal().Err(err).Msg("configuration")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := gateway.Run(ctx, cfg, log, nil); err != nil {
		log.Fatal().Err(err).Msg("gateway stopped")
	}
}

// Command tts runs the tts service alone (see services/tts/README.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/tts"
)

func main() {
	log := telemetry.NewLogger("tts")
	cfg, err := tts.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tts: configuration:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := tts.Run(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg("tts stopped")
		os.Exit(1)
	}
}

// Command asr runs one asr replica alone (see services/asr/README.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/asr"
)

func main() {
	log := telemetry.NewLogger("asr")
	cfg, err := asr.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "asr: configuration:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := asr.Run(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg("asr stopped")
		os.Exit(1)
	}
}

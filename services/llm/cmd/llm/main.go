// Command llm runs the llm service alone (see services/llm/README.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/llm"
)

func main() {
	log := telemetry.NewLogger("llm")
	cfg, err := llm.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "llm: configuration:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := llm.Run(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg("llm stopped")
		os.Exit(1)
	}
}

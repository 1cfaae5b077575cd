// Command room-agent runs the room-agent service alone (see services/room-agent/README.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicia-voice/alicia/pkg/telemetry"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

func main() {
	log := telemetry.NewLogger("room-agent")
	cfg, err := roomagent.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "room-agent: configuration:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := roomagent.Run(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg("room-agent stopped")
		os.Exit(1)
	}
}

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
	"github.com/alicia-voice/alicia/services/room-agent/internal/sysmon"
)

func main() {
	// First of all: the agent runs again in place with the runtime setting
	// that keeps sysmon from being woken for every audio packet (package sysmon).
	sysmonErr := sysmon.KeepAwake()
	log := telemetry.NewLogger("room-agent")
	if sysmonErr != nil {
		log.Warn().Err(sysmonErr).Msg("running without the sysmon setting: more CPU per voice session")
	}
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

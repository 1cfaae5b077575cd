// Command room-agent runs the room-agent service alone (see services/room-agent/README.md).
package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/svcmain"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
	"github.com/alicia-voice/alicia/services/room-agent/internal/sysmon"
)

func main() {
	// First of all: the agent runs again in place with the runtime setting
	// that keeps sysmon from being woken for every audio packet (package sysmon).
	sysmonErr := sysmon.KeepAwake()
	svcmain.Main("room-agent", roomagent.ConfigFromEnv, func(ctx context.Context, cfg roomagent.Config, log zerolog.Logger) error {
		if sysmonErr != nil {
			log.Warn().Err(sysmonErr).Msg("running without the sysmon setting: more CPU per voice session")
		}
		return roomagent.Run(ctx, cfg, log)
	})
}

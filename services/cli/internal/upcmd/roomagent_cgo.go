//go:build cgo

package upcmd

import (
	"context"

	"github.com/rs/zerolog"

	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// roomAgentFromEnv: this build has cgo, so it has the room-agent (Opus and
// soxr for LiveKit PCM tracks).
func roomAgentFromEnv(natsURL func() (string, error)) (roomAgent, error) {
	cfg, err := roomagent.ConfigFromEnv()
	if err != nil {
		return roomAgent{}, err
	}
	if cfg.NATSURL, err = natsURL(); err != nil {
		return roomAgent{}, err
	}
	return roomAgent{run: func(ctx context.Context, log zerolog.Logger) error { return roomagent.Run(ctx, cfg, log) }}, nil
}

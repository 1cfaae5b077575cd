//go:build cgo

package upcmd

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/config"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// roomAgentFrom: this build has cgo, so it has the room-agent (Opus and
// soxr for LiveKit PCM tracks), configured from src.
func roomAgentFrom(src config.Source, natsURL func() (string, error)) (roomAgent, error) {
	cfg, err := roomagent.ConfigFrom(src)
	if err != nil {
		return roomAgent{}, err
	}
	if cfg.NATSURL, err = natsURL(); err != nil {
		return roomAgent{}, err
	}
	return roomAgent{run: func(ctx context.Context, log zerolog.Logger) error { return roomagent.Run(ctx, cfg, log) },
		vad: roomagent.DescribeVAD(cfg), postgres: func(url string) { cfg.PostgresURL = url }}, nil
}

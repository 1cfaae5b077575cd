package roomagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/services/room-agent/internal/agent"
)

// Run serves dispatch requests until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "room-agent")
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		return fmt.Errorf("room-agent: %w", err)
	}
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("room-agent: metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.Handler())
		// Profiles of the audio paths, on the same private address.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("metrics server")
			}
		}()
		defer srv.Close()
	}
	// The LiveKit SDK (and pion under it) logs through its own logger: warnings and errors only.
	if zl, err := protoLogger.NewZapLogger(&protoLogger.Config{Level: "warn", JSON: true}); err == nil {
		lksdk.SetLogger(zl)
	}
	a := agent.New(cfg.agent(), agent.Deps{NC: nc, JS: js, Log: log})
	log.Info().Str("livekit", cfg.LiveKitURL).Int("max_rooms", cfg.MaxRooms).Msg("room-agent running")
	return a.Run(ctx)
}

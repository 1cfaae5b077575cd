package roomagent

import (
	"context"
	"fmt"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/room-agent/internal/agent"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// Run serves dispatch requests until ctx ends; then it drains: /healthz
// reports draining, no dispatch is taken, and each room's turn being spoken
// plays to its end before the agent leaves and hands the request back
// (at once when the stop is forced: svcmain.WorkContext).
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	edge.RefusalMetrics()
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "room-agent", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()
	// Client input is refused while CONVERSATIONS holds too much that
	// persistence has not applied (bus.Connect created what was missing).
	streamBacklog, err := backlog.Watch(ctx, js, backlog.Config{Limit: cfg.BacklogLimit, Log: log})
	if err != nil {
		return fmt.Errorf("room-agent: %w", err)
	}
	defer streamBacklog.Stop()
	if cfg.MetricsAddr != "" {
		stop, err := telemetry.ServeMetrics(cfg.MetricsAddr, true, log, svcmain.Draining(ctx),
			// The dispatch consumer exists once the agent runs (below).
			telemetry.NATSConnected(nc), telemetry.ConsumerExists(bus.StreamDispatch, agent.DispatchConsumer, js.Consumer))
		if err != nil {
			return fmt.Errorf("room-agent: %w", err)
		}
		defer stop()
		unwatch, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: log,
			Consumers: map[string][]string{bus.StreamDispatch: {agent.DispatchConsumer}}})
		if err != nil {
			return fmt.Errorf("room-agent: %w", err)
		}
		defer unwatch()
	}
	// The LiveKit SDK (and pion under it) logs through its own logger: warnings and errors only.
	if zl, err := protoLogger.NewZapLogger(&protoLogger.Config{Level: "warn", JSON: true}); err == nil {
		lksdk.SetLogger(zl)
	}
	ac := cfg.agent()
	model, kind, err := LoadVAD(cfg, log)
	if err != nil {
		return err
	}
	if model != nil {
		defer model.Close()
	}
	ac.VAD.Model = model
	agent.DefaultMetrics().VADKind(kind)
	// server-info lists the instances and what each listens with.
	unregister, err := rpc.AddVoiceAgent(nc, "0.1.0", kind, DescribeVAD(cfg))
	if err != nil {
		return fmt.Errorf("room-agent: %w", err)
	}
	defer unregister()
	handsFree, stopPrefs, err := followPrefs(ctx, cfg, nc, log)
	if err != nil {
		return fmt.Errorf("room-agent: %w", err)
	}
	defer stopPrefs()
	ac.HandsFree = handsFree
	a := agent.New(ac, agent.Deps{NC: nc, JS: js, Log: log, Backlog: streamBacklog})
	log.Info().Str("livekit", cfg.LiveKitURL).Int("max_rooms", cfg.MaxRooms).Str("vad", kind).Msg("room-agent running")
	return a.Run(ctx, svcmain.WorkContext(ctx))
}

// followPrefs returns what tells whether a conversation is in hands-free
// mode now: its effective Configuration.wakeWord (pkg/prefs), read from
// Postgres when ALICIA_POSTGRES_URL is set and followed live on the bus
// (every conversation's Configuration, every UserSettings) either way.
func followPrefs(ctx context.Context, cfg Config, nc *nats.Conn, log zerolog.Logger) (func(context.Context, string) (bool, error), func(), error) {
	var q prefs.Querier
	closePool := func() {}
	if cfg.PostgresURL == "" {
		log.Warn().Msg("no ALICIA_POSTGRES_URL: hands-free mode follows only the Configuration and UserSettings heard since start")
	} else {
		pool, err := pgread.Open(ctx, cfg.PostgresURL)
		if err != nil {
			return nil, nil, err
		}
		q, closePool = pool, pool.Close
	}
	cache := prefs.NewCache(q, prefs.Defaults{})
	rt := bus.NewRoutes("room-agent-prefs", log)
	cache.Route(rt)
	subs, err := rt.Subscribe(ctx, nc)
	if err != nil {
		closePool()
		return nil, nil, err
	}
	handsFree := func(ctx context.Context, cid string) (bool, error) {
		eff, err := cache.Get(ctx, cid)
		return eff.WakeWord, err
	}
	return handsFree, func() { subs.Close(); closePool() }, nil
}

// VADImageDir is where the image has the neural VAD's model and runtime
// (deploy/Dockerfile, target room-agent).
const VADImageDir = vad.ImageDir

// DescribeVAD says which VAD cfg will listen with, and why (the banner of
// alicia up): the neural one where its runtime is found, else the energy
// one with what is missing.
func DescribeVAD(cfg Config) string {
	if cfg.VAD == VADEnergy {
		return "energy (ALICIA_VAD=energy): noise and the answer's echo can start turns and interrupt"
	}
	rt, err := vad.FindRuntime(cfg.ONNXRuntimeLib, cfg.VADModel)
	if err != nil {
		if cfg.VAD == VADNeural {
			return "neural (ALICIA_VAD=neural), but " + err.Error() + ": the room-agent will not start"
		}
		return "energy, the fallback: " + err.Error()
	}
	return "neural (Silero VAD, " + rt.Model + ")"
}

// LoadVAD loads the neural VAD as cfg.VAD says and returns it (nil: the
// energy VAD) with the kind that listens, "neural" or "energy". With
// "auto", a missing runtime is a warning and the energy VAD listens; with
// "neural", an error.
func LoadVAD(cfg Config, log zerolog.Logger) (*vad.Silero, string, error) {
	if cfg.VAD == VADEnergy {
		log.Info().Msg("energy VAD (ALICIA_VAD=energy): noise and the answer's echo can start turns and interrupt")
		return nil, VADEnergy, nil
	}
	rt, err := vad.FindRuntime(cfg.ONNXRuntimeLib, cfg.VADModel)
	var m *vad.Silero
	if err == nil {
		m, err = vad.LoadSilero(rt)
	}
	if err != nil {
		if cfg.VAD == VADNeural {
			return nil, "", fmt.Errorf("room-agent: ALICIA_VAD=neural: %w", err)
		}
		log.Warn().Err(err).Msg("neural VAD unavailable: the energy VAD listens (noise and the answer's echo can start turns and interrupt)")
		return nil, VADEnergy, nil
	}
	log.Info().Str("model", rt.Model).Str("onnxruntime", m.RuntimeVersion()).Msg("neural VAD (Silero)")
	return m, VADNeural, nil
}

// RegisterMetrics registers the service's metrics on the default registry
// (Run registers them too). deploy/METRICS.md, the table of every
// service's metrics, is made from what it registers.
func RegisterMetrics() { agent.DefaultMetrics() }

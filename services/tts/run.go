package tts

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/tts/internal/metrics"
	"github.com/alicia-voice/alicia/services/tts/internal/speech"
	"github.com/alicia-voice/alicia/services/tts/internal/synth"
)

// Run starts the tts service and blocks until ctx is cancelled; then it
// takes no more turns, reports draining on /healthz, and each turn being
// spoken finishes its sentence and is handed to another replica (at once
// when the stop is forced: svcmain.WorkContext).
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	synthesizer, closeSynth, err := newSynthesizer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("tts: %w", err)
	}
	defer closeSynth()
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "tts", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()
	convs, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return fmt.Errorf("tts: stream %s: %w", bus.StreamConversations, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamConversations,
		speech.ConsumerConfig(cfg.Consumer, cfg.AckWait, 4*cfg.MaxTurns))
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("tts: consumer %s: %w", cfg.Consumer, err)
	}
	if cfg.MetricsAddr != "" {
		stop, err := telemetry.ServeMetrics(cfg.MetricsAddr, false, log, svcmain.Draining(ctx),
			telemetry.NATSConnected(nc), telemetry.ConsumerExists(bus.StreamConversations, cfg.Consumer, js.Consumer))
		if err != nil {
			return err
		}
		defer stop()
		unwatch, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: log,
			Consumers: map[string][]string{bus.StreamConversations: {cfg.Consumer}}})
		if err != nil {
			return err
		}
		defer unwatch()
	}
	cache, closePrefs, err := newPrefs(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("tts: %w", err)
	}
	defer closePrefs()
	sp := speech.New(speech.Deps{
		NC: nc, Conversations: convs, Publisher: bus.NewPublisher(js), Synth: synthesizer, Prefs: cache, Metrics: metrics.Default(), Log: log,
	}, speech.Settings{
		Chunk: cfg.Chunk, MaxAhead: cfg.MaxAhead, MaxTurns: cfg.MaxTurns, AckWait: cfg.AckWait,
		TurnIdle: cfg.TurnIdle, MaxLag: cfg.MaxLag, Timeout: cfg.Timeout, RetryDelay: cfg.RetryDelay,
		StoreAudio: cfg.StoreAudio, AheadTTL: cfg.AheadTTL,
	})
	log.Info().Str("engine", synthesizer.Engine()).Str("consumer", cfg.Consumer).Msg("tts running")
	return sp.Run(ctx, svcmain.WorkContext(ctx), cons)
}

// newSynthesizer builds the configured backend; espeak is checked at once.
func newSynthesizer(ctx context.Context, cfg Config) (speech.Synthesizer, func(), error) {
	if cfg.Engine == EngineEspeak {
		e, err := synth.NewEspeak(ctx, cfg.EspeakPath, cfg.voice())
		if err != nil {
			return nil, nil, err
		}
		return e, func() {}, nil
	}
	o := synth.NewOpenAI(synth.OpenAIConfig{URL: cfg.URL, APIKey: cfg.APIKey, Model: cfg.Model, Voice: cfg.voice(), Format: cfg.ResponseFormat})
	return o, o.Close, nil
}

// newPrefs is the cache of the conversations' voices: read from Postgres
// when ALICIA_POSTGRES_URL is set, heard live on the bus either way.
func newPrefs(ctx context.Context, cfg Config, log zerolog.Logger) (*prefs.Cache, func(), error) {
	d := prefs.Defaults{Voice: cfg.voice(), SpeechSpeed: cfg.Speed}
	if cfg.PostgresURL == "" {
		log.Warn().Msg("no ALICIA_POSTGRES_URL: conversations speak with the installation's voice unless a change is heard live")
		return prefs.NewCache(nil, d), func() {}, nil
	}
	pool, err := pgread.Open(ctx, cfg.PostgresURL)
	if err != nil {
		return nil, nil, err
	}
	return prefs.NewCache(pool, d), pool.Close, nil
}

// RegisterMetrics registers the service's metrics on the default registry
// (Run registers them too). deploy/METRICS.md, the table of every
// service's metrics, is made from what it registers.
func RegisterMetrics() { metrics.Default() }

// Package tts is the tts service: it speaks the assistant's voice turns. A
// turn whose StartAnswer asks for voice is taken by one replica, which reads
// the turn's AssistantSentences in order, synthesises each one (an
// OpenAI-compatible /v1/audio/speech backend such as Kokoro behind speaches,
// or a local espeak-ng), streams the audio to the room-agent on core NATS
// and stores each sentence's audio fields through persistence. A
// ControlStop cancels the turn's synthesis at once. See README.md.
package tts

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/svcmain"
)

// Engines.
const (
	EngineOpenAI = engines.OpenAI
	EngineEspeak = engines.Espeak
)

// Config of the tts service. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	// Engine is openai (an OpenAI-compatible /v1/audio/speech) or espeak
	// (a local espeak-ng) (ALICIA_TTS_ENGINE).
	Engine string
	// URL of the OpenAI-compatible server (ALICIA_TTS_URL), with or
	// without the /v1 suffix: http://speaches:8000 and
	// http://speaches:8000/v1 both reach …/v1/audio/speech.
	URL   string
	Model string // ALICIA_TTS_MODEL (openai)
	Voice string // ALICIA_TTS_VOICE: af_sarah for openai, en-us for espeak unless set
	// Speed is the installation's speaking rate, 1 being the voice's own
	// (ALICIA_TTS_SPEED); a person's or conversation's own comes first.
	Speed float64
	// PostgresURL (ALICIA_POSTGRES_URL + _FILE, read-only) is where each
	// conversation's and person's voice, speed and language are read
	// (pkg/prefs); without it every conversation speaks with the
	// installation's, except for changes heard live.
	PostgresURL string
	APIKey      string // ALICIA_TTS_API_KEY or ALICIA_TTS_API_KEY_FILE
	// ResponseFormat asked of the openai backend: pcm (24 kHz mono s16le)
	// or wav (any rate, resampled to 24 kHz) (ALICIA_TTS_RESPONSE_FORMAT).
	ResponseFormat string
	EspeakPath     string // ALICIA_ESPEAK_PATH
	// Timeout bounds one synthesis request (ALICIA_TTS_TIMEOUT).
	Timeout time.Duration
	// RetryDelay is the pause before the one retry of a failed synthesis
	// (ALICIA_TTS_RETRY_DELAY).
	RetryDelay time.Duration

	// StoreAudio puts each sentence's PCM in SentenceAudio.data, so
	// persistence stores the bytes (ALICIA_TTS_STORE_AUDIO).
	StoreAudio bool
	// Chunk is the audio carried by one SpeechAudio envelope (ALICIA_TTS_CHUNK).
	Chunk time.Duration
	// MaxAhead is how many synthesised sentences of a turn may wait for
	// playout before the next one is synthesised (ALICIA_TTS_MAX_AHEAD).
	MaxAhead int

	// AheadTTL is how long the first sentence of a preemptive answer,
	// synthesised ahead (alicia.spec.{cid}.speak), waits for its turn; 0
	// synthesises nothing ahead (ALICIA_TTS_AHEAD_TTL).
	AheadTTL time.Duration

	// MaxTurns is the most voice turns one replica speaks at once; past it a
	// turn is left to another replica (ALICIA_TTS_MAX_TURNS).
	MaxTurns int
	// AckWait: a turn whose replica stops heartbeating for this long goes to
	// another replica, which resumes after the last stored sentence
	// (ALICIA_TTS_ACK_WAIT).
	AckWait time.Duration
	// TurnIdle ends a turn that received no sentence for this long
	// (ALICIA_TTS_TURN_IDLE).
	TurnIdle time.Duration
	// MaxLag: a turn that started longer ago than this when it is taken
	// (the service was down) is not spoken (ALICIA_TTS_MAX_LAG).
	MaxLag time.Duration
	// Consumer is the durable consumer shared by the replicas (ALICIA_TTS_CONSUMER).
	Consumer string
	// MetricsAddr serves /metrics when set (ALICIA_TTS_METRICS_ADDR); the
	// metrics are on the default Prometheus registry either way.
	svcmain.Metrics
}

// metricsAddrVar names the tts's metrics address.
const metricsAddrVar = "ALICIA_TTS_METRICS_ADDR"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Bus:            svcmain.DefaultBus(),
		Engine:         EngineOpenAI,
		URL:            engines.DefaultTTSURL,
		Model:          engines.DefaultTTSModel,
		ResponseFormat: "pcm",
		Speed:          1,
		EspeakPath:     engines.DefaultEspeakPath,
		Timeout:        30 * time.Second,
		RetryDelay:     100 * time.Millisecond,
		Chunk:          100 * time.Millisecond,
		MaxAhead:       2,
		AheadTTL:       30 * time.Second,
		MaxTurns:       256,
		AckWait:        10 * time.Second,
		TurnIdle:       2 * time.Minute,
		MaxLag:         2 * time.Minute,
		Consumer:       "tts",
	}
}

// DefaultVoice is the voice of an engine when ALICIA_TTS_VOICE is not set.
func DefaultVoice(engine string) string { return engines.DefaultVoice(engine) }

// ConfigFromEnv is ConfigFrom(config.Environ()), for the tts command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_TTS_ENGINE", &c.Engine)
	src.String("ALICIA_TTS_URL", &c.URL)
	src.String("ALICIA_TTS_MODEL", &c.Model)
	src.String("ALICIA_TTS_VOICE", &c.Voice)
	src.String("ALICIA_TTS_RESPONSE_FORMAT", &c.ResponseFormat)
	src.String("ALICIA_ESPEAK_PATH", &c.EspeakPath)
	src.String("ALICIA_TTS_CONSUMER", &c.Consumer)
	c.Metrics.From(src, metricsAddrVar)
	err := errors.Join(
		c.Bus.From(src),
		src.Secret("ALICIA_TTS_API_KEY", &c.APIKey),
		src.Secret("ALICIA_POSTGRES_URL", &c.PostgresURL),
		src.Float64("ALICIA_TTS_SPEED", &c.Speed),
		src.Duration("ALICIA_TTS_TIMEOUT", &c.Timeout),
		src.Duration("ALICIA_TTS_RETRY_DELAY", &c.RetryDelay),
		src.Bool("ALICIA_TTS_STORE_AUDIO", &c.StoreAudio),
		src.Duration("ALICIA_TTS_CHUNK", &c.Chunk),
		src.Int("ALICIA_TTS_MAX_AHEAD", &c.MaxAhead),
		src.Duration("ALICIA_TTS_AHEAD_TTL", &c.AheadTTL),
		src.Int("ALICIA_TTS_MAX_TURNS", &c.MaxTurns),
		src.Duration("ALICIA_TTS_ACK_WAIT", &c.AckWait),
		src.Duration("ALICIA_TTS_TURN_IDLE", &c.TurnIdle),
		src.Duration("ALICIA_TTS_MAX_LAG", &c.MaxLag),
	)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// voice is the configured voice or the engine's default.
func (c Config) voice() string {
	if c.Voice != "" {
		return c.Voice
	}
	return DefaultVoice(c.Engine)
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, c.Bus.Validate(), c.Metrics.Validate(metricsAddrVar))
	switch c.Engine {
	case EngineOpenAI:
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("ALICIA_TTS_URL %q is not an http(s) URL", c.URL)
		}
		if c.Model == "" {
			bad("model name is empty (ALICIA_TTS_MODEL)")
		}
		if c.ResponseFormat != "pcm" && c.ResponseFormat != "wav" {
			bad("ALICIA_TTS_RESPONSE_FORMAT %q is neither pcm nor wav", c.ResponseFormat)
		}
	case EngineEspeak:
		if c.EspeakPath == "" {
			bad("espeak-ng path is empty (ALICIA_ESPEAK_PATH)")
		}
	default:
		bad("ALICIA_TTS_ENGINE %q is neither %s nor %s", c.Engine, EngineOpenAI, EngineEspeak)
	}
	if c.Speed < prefs.MinSpeed || c.Speed > prefs.MaxSpeed {
		bad("ALICIA_TTS_SPEED %v is outside %v..%v", c.Speed, prefs.MinSpeed, prefs.MaxSpeed)
	}
	if c.Timeout <= 0 {
		bad("ALICIA_TTS_TIMEOUT must be positive")
	}
	if c.RetryDelay < 0 || c.RetryDelay > 10*time.Second {
		bad("ALICIA_TTS_RETRY_DELAY %s is outside 0..10s", c.RetryDelay)
	}
	if c.Chunk < 10*time.Millisecond || c.Chunk > time.Second {
		bad("ALICIA_TTS_CHUNK %s is outside 10ms..1s", c.Chunk)
	}
	if c.MaxAhead < 1 || c.MaxAhead > 100 {
		bad("ALICIA_TTS_MAX_AHEAD %d is outside 1..100", c.MaxAhead)
	}
	if c.AheadTTL < 0 || c.AheadTTL > 5*time.Minute {
		bad("ALICIA_TTS_AHEAD_TTL %s is outside 0..5m", c.AheadTTL)
	}
	if c.MaxTurns < 1 {
		bad("ALICIA_TTS_MAX_TURNS must be at least 1")
	}
	if c.AckWait < time.Second {
		bad("ALICIA_TTS_ACK_WAIT %s is under 1s", c.AckWait)
	}
	if c.TurnIdle <= 0 {
		bad("ALICIA_TTS_TURN_IDLE must be positive")
	}
	if c.MaxLag <= 0 {
		bad("ALICIA_TTS_MAX_LAG must be positive")
	}
	if c.Consumer == "" {
		bad("consumer name is empty (ALICIA_TTS_CONSUMER)")
	}
	return errors.Join(errs...)
}

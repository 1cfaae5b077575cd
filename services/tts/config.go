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

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
)

// Engines.
const (
	EngineOpenAI = engines.OpenAI
	EngineEspeak = engines.Espeak
)

// Config of the tts service. Defaults in code, overridden by ALICIA_* env vars.
type Config struct {
	NATSURL string // ALICIA_NATS_URL

	// NATSAuth logs in to NATS (ALICIA_NATS_USER, ALICIA_NATS_PASSWORD + _FILE).
	NATSAuth bus.Credentials

	// Engine is openai (an OpenAI-compatible /v1/audio/speech) or espeak
	// (a local espeak-ng) (ALICIA_TTS_ENGINE).
	Engine string
	// URL of the OpenAI-compatible server (ALICIA_TTS_URL), with or
	// without the /v1 suffix: http://speaches:8000 and
	// http://speaches:8000/v1 both reach …/v1/audio/speech.
	URL    string
	Model  string // ALICIA_TTS_MODEL (openai)
	Voice  string // ALICIA_TTS_VOICE: af_sarah for openai, en-us for espeak unless set
	APIKey string // ALICIA_TTS_API_KEY or ALICIA_TTS_API_KEY_FILE
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
	MetricsAddr string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		NATSURL:        "nats://127.0.0.1:4222",
		Engine:         EngineOpenAI,
		URL:            engines.DefaultTTSURL,
		Model:          engines.DefaultTTSModel,
		ResponseFormat: "pcm",
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

// ConfigFromEnv returns DefaultConfig overridden by the environment.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	config.String("ALICIA_NATS_URL", &c.NATSURL)
	if err := bus.CredentialsFromEnv(&c.NATSAuth); err != nil {
		return c, err
	}
	config.String("ALICIA_TTS_ENGINE", &c.Engine)
	config.String("ALICIA_TTS_URL", &c.URL)
	config.String("ALICIA_TTS_MODEL", &c.Model)
	config.String("ALICIA_TTS_VOICE", &c.Voice)
	config.String("ALICIA_TTS_RESPONSE_FORMAT", &c.ResponseFormat)
	config.String("ALICIA_ESPEAK_PATH", &c.EspeakPath)
	config.String("ALICIA_TTS_CONSUMER", &c.Consumer)
	config.String("ALICIA_TTS_METRICS_ADDR", &c.MetricsAddr)
	err := errors.Join(
		config.Secret("ALICIA_TTS_API_KEY", &c.APIKey),
		config.Duration("ALICIA_TTS_TIMEOUT", &c.Timeout),
		config.Duration("ALICIA_TTS_RETRY_DELAY", &c.RetryDelay),
		config.Bool("ALICIA_TTS_STORE_AUDIO", &c.StoreAudio),
		config.Duration("ALICIA_TTS_CHUNK", &c.Chunk),
		config.Int("ALICIA_TTS_MAX_AHEAD", &c.MaxAhead),
		config.Duration("ALICIA_TTS_AHEAD_TTL", &c.AheadTTL),
		config.Int("ALICIA_TTS_MAX_TURNS", &c.MaxTurns),
		config.Duration("ALICIA_TTS_ACK_WAIT", &c.AckWait),
		config.Duration("ALICIA_TTS_TURN_IDLE", &c.TurnIdle),
		config.Duration("ALICIA_TTS_MAX_LAG", &c.MaxLag),
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
	if c.NATSURL == "" {
		bad("NATS URL is empty (ALICIA_NATS_URL)")
	}
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

// Package gateway is Alicia's HTTP edge: API keys, health and metrics, the
// REST API under /v1 (API.md) and the WebSocket transport for protocol
// envelopes (/v1/ws). It reads Postgres through a read-only session and
// writes only by publishing to JetStream, answering once persistence has
// applied the write.
package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// Config of the gateway. Defaults in code, overridden by ALICIA_* env vars.
type Config struct {
	HTTPAddr    string // ALICIA_HTTP_ADDR
	NATSURL     string // ALICIA_NATS_URL
	PostgresURL string // ALICIA_POSTGRES_URL (+ _FILE)
	APIKeys     string // ALICIA_API_KEYS (+ _FILE): "key,…" or "user:key,…"
	// RateLimit is requests per second per API key (ALICIA_RATE_LIMIT, default 20; burst twice that).
	RateLimit int
	// QueueSize bounds the envelopes waiting for one WebSocket client (ALICIA_WS_QUEUE, default 256).
	QueueSize int
	// AllowedOrigins are extra browser origins (host patterns) allowed to open /v1/ws (ALICIA_ALLOWED_ORIGINS, comma-separated).
	AllowedOrigins []string
	// Model backends (OpenAI-compatible base URLs ending in /v1) whose
	// reachability GET /v1/server-info reports; an empty URL is "not configured".
	LLM        Backend // ALICIA_LLM_URL, ALICIA_LLM_MODEL, ALICIA_LLM_API_KEY (+ _FILE)
	ASR        Backend // ALICIA_ASR_URL, ALICIA_ASR_MODEL, ALICIA_ASR_API_KEY (+ _FILE)
	TTS        Backend // ALICIA_TTS_URL, ALICIA_TTS_MODEL, ALICIA_TTS_API_KEY (+ _FILE)
	Embeddings Backend // ALICIA_EMBEDDING_URL, ALICIA_EMBEDDING_MODEL, ALICIA_EMBEDDING_API_KEY (+ _FILE)
	// WriteTimeout bounds a REST write: publish, then wait until persistence
	// has applied it (ALICIA_WRITE_TIMEOUT, default 10s; 504 beyond).
	WriteTimeout time.Duration
	// LiveKit is the server voice clients join (GET /v1/conversations/{id}/token);
	// unset, that route answers 503.
	LiveKit LiveKit
}

// LiveKit is the LiveKit server the gateway hands out tokens for.
type LiveKit struct {
	// URL of the server (ALICIA_LIVEKIT_URL, ws(s):// or http(s)://).
	URL string
	// PublicURL is the URL given to clients when they reach the server at
	// another address than the services do (ALICIA_LIVEKIT_PUBLIC_URL;
	// default URL).
	PublicURL string
	// APIKey and APISecret sign the tokens (ALICIA_LIVEKIT_API_KEY,
	// ALICIA_LIVEKIT_API_SECRET, + _FILE).
	APIKey, APISecret string
	// TokenTTL is how long a token lets a client join (ALICIA_LIVEKIT_TOKEN_TTL, default 1h).
	TokenTTL time.Duration
}

// Enabled reports whether LiveKit is configured.
func (l LiveKit) Enabled() bool { return l.URL != "" || l.APIKey != "" || l.APISecret != "" }

// ClientURL is the URL clients connect to.
func (l LiveKit) ClientURL() string {
	if l.PublicURL != "" {
		return l.PublicURL
	}
	return l.URL
}

// LiveKitFromEnv sets c.LiveKit from ALICIA_LIVEKIT_* (secrets also from
// _FILE); a launcher that builds its Config in code (alicia up) calls it too.
func (c *Config) LiveKitFromEnv() error {
	config.String("ALICIA_LIVEKIT_URL", &c.LiveKit.URL)
	config.String("ALICIA_LIVEKIT_PUBLIC_URL", &c.LiveKit.PublicURL)
	return errors.Join(
		config.Secret("ALICIA_LIVEKIT_API_KEY", &c.LiveKit.APIKey),
		config.Secret("ALICIA_LIVEKIT_API_SECRET", &c.LiveKit.APISecret),
		config.Duration("ALICIA_LIVEKIT_TOKEN_TTL", &c.LiveKit.TokenTTL),
	)
}

func (l LiveKit) validate() error {
	if !l.Enabled() {
		return nil
	}
	var errs []error
	for _, u := range []struct{ name, v string }{{"ALICIA_LIVEKIT_URL", l.URL}, {"ALICIA_LIVEKIT_PUBLIC_URL", l.PublicURL}} {
		if u.v == "" && u.name == "ALICIA_LIVEKIT_PUBLIC_URL" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "ws" && p.Scheme != "wss" && p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want a ws(s):// or http(s):// URL of the LiveKit server", u.name, u.v))
		}
	}
	if l.APIKey == "" || l.APISecret == "" {
		errs = append(errs, errors.New("LiveKit needs ALICIA_LIVEKIT_URL, ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET together"))
	}
	if l.TokenTTL < time.Minute || l.TokenTTL > 24*time.Hour {
		errs = append(errs, fmt.Errorf("ALICIA_LIVEKIT_TOKEN_TTL %s: want 1m..24h", l.TokenTTL))
	}
	return errors.Join(errs...)
}

// Backend is an OpenAI-compatible model endpoint.
type Backend struct {
	URL    string
	Model  string
	APIKey string
}

// ModelsFromEnv sets the model backends from ALICIA_{LLM,ASR,TTS,EMBEDDING}_{URL,MODEL,API_KEY}
// (keys also from _FILE); a launcher that builds its Config in code (alicia up) calls it too.
func (c *Config) ModelsFromEnv() error {
	return errors.Join(
		backendFromEnv("LLM", &c.LLM),
		backendFromEnv("ASR", &c.ASR),
		backendFromEnv("TTS", &c.TTS),
		backendFromEnv("EMBEDDING", &c.Embeddings),
	)
}

// backendFromEnv reads ALICIA_{prefix}_URL, _MODEL and _API_KEY (+ _FILE).
func backendFromEnv(prefix string, b *Backend) error {
	config.String("ALICIA_"+prefix+"_URL", &b.URL)
	config.String("ALICIA_"+prefix+"_MODEL", &b.Model)
	return config.Secret("ALICIA_"+prefix+"_API_KEY", &b.APIKey)
}

func (b Backend) validate(prefix string) error {
	if b.URL == "" {
		return nil
	}
	u, err := url.Parse(b.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("ALICIA_%s_URL %q: want an http(s) URL such as http://host:8000/v1", prefix, b.URL)
	}
	return nil
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{HTTPAddr: "127.0.0.1:8080", NATSURL: "nats://127.0.0.1:4222", RateLimit: 20, QueueSize: 256, WriteTimeout: 10 * time.Second,
		LiveKit: LiveKit{TokenTTL: time.Hour}}
}

// ConfigFromEnv returns DefaultConfig overridden by the environment.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	config.String("ALICIA_HTTP_ADDR", &c.HTTPAddr)
	config.String("ALICIA_NATS_URL", &c.NATSURL)
	var origins string
	config.String("ALICIA_ALLOWED_ORIGINS", &origins)
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.AllowedOrigins = append(c.AllowedOrigins, o)
		}
	}
	err := errors.Join(
		config.Secret("ALICIA_POSTGRES_URL", &c.PostgresURL),
		config.Secret("ALICIA_API_KEYS", &c.APIKeys),
		config.Int("ALICIA_RATE_LIMIT", &c.RateLimit),
		config.Int("ALICIA_WS_QUEUE", &c.QueueSize),
		config.Duration("ALICIA_WRITE_TIMEOUT", &c.WriteTimeout),
		c.ModelsFromEnv(),
		c.LiveKitFromEnv(),
	)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("ALICIA_HTTP_ADDR %q: %w", c.HTTPAddr, err))
	}
	if c.NATSURL == "" {
		errs = append(errs, errors.New("NATS URL is empty (ALICIA_NATS_URL)"))
	}
	if c.PostgresURL == "" {
		errs = append(errs, errors.New("Postgres URL is empty (ALICIA_POSTGRES_URL)"))
	}
	if _, err := auth.ParseKeys(c.APIKeys); err != nil {
		errs = append(errs, fmt.Errorf("ALICIA_API_KEYS: %w", err))
	}
	if c.RateLimit < 1 {
		errs = append(errs, fmt.Errorf("rate limit %d must be at least 1", c.RateLimit))
	}
	if c.QueueSize < 1 {
		errs = append(errs, fmt.Errorf("WebSocket queue %d must be at least 1", c.QueueSize))
	}
	if c.WriteTimeout < time.Second {
		errs = append(errs, fmt.Errorf("write timeout %s must be at least 1s (ALICIA_WRITE_TIMEOUT)", c.WriteTimeout))
	}
	errs = append(errs, c.LLM.validate("LLM"), c.ASR.validate("ASR"), c.TTS.validate("TTS"), c.Embeddings.validate("EMBEDDING"),
		c.LiveKit.validate())
	return errors.Join(errs...)
}

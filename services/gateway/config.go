// Package gateway is Alicia's HTTP edge: API keys, health and metrics, and
// the WebSocket transport for protocol envelopes (/v1/ws). It reads Postgres
// through a read-only session and writes only by publishing to JetStream.
package gateway

import (
	"errors"
	"fmt"
	"net"
	"strings"

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
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{HTTPAddr: "127.0.0.1:8080", NATSURL: "nats://127.0.0.1:4222", RateLimit: 20, QueueSize: 256}
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
	return errors.Join(errs...)
}

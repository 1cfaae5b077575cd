// Package asr is the asr service: any number of replicas share the ASR_JOBS
// work queue through one durable consumer, send each job's speech to an
// OpenAI-compatible /v1/audio/transcriptions backend (Whisper behind
// speaches), and publish partial and final Transcriptions; a final one said
// with enough confidence becomes the UserMessage the llm answers. See
// README.md.
package asr

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/svcmain"
)

// Config of the asr service. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	// URL of the OpenAI-compatible backend (ALICIA_ASR_URL), with or without
	// the /v1 suffix: http://speaches:8000 and http://speaches:8000/v1 both
	// reach …/v1/audio/transcriptions.
	URL    string
	Model  string // ALICIA_ASR_MODEL
	APIKey string // ALICIA_ASR_API_KEY or ALICIA_ASR_API_KEY_FILE
	// Language is the hint for jobs that carry none (ALICIA_ASR_LANGUAGE,
	// ISO-639-1; empty: the backend detects it).
	Language string
	// Timeout bounds one transcription request (ALICIA_ASR_TIMEOUT).
	Timeout time.Duration
	// Attempts of a final job's transcription when the backend fails
	// transiently (ALICIA_ASR_ATTEMPTS); partials are tried once.
	Attempts     int
	RetryBackoff time.Duration // ALICIA_ASR_RETRY_BACKOFF: first retry delay, doubling
	// MinConfidence: a final transcript scoring below it is shown to the
	// client but does not become a user message (ALICIA_ASR_MIN_CONFIDENCE).
	MinConfidence float64
	// PostgresURL (ALICIA_POSTGRES_URL + _FILE, read-only) is where each
	// conversation's and person's language is read (pkg/prefs); without it
	// only changes heard live apply.
	PostgresURL string

	// Concurrency is how many transcriptions one replica runs at once
	// (ALICIA_ASR_CONCURRENCY); storing a finished job's results overlaps
	// the next one.
	Concurrency int
	// Consumer is the durable consumer every replica shares (ALICIA_ASR_CONSUMER).
	Consumer string
	// AckWait: a job whose replica stops heartbeating for this long goes to
	// another replica (ALICIA_ASR_ACK_WAIT).
	AckWait    time.Duration
	MaxDeliver int // ALICIA_ASR_MAX_DELIVER: tries of one job
	// PullWait is how long an idle slot's pull request waits before it is
	// renewed; a stopping replica hands its running jobs over after at most
	// this (ALICIA_ASR_PULL_WAIT).
	PullWait time.Duration
	// MetricsAddr serves /metrics when set (ALICIA_ASR_METRICS_ADDR); the
	// metrics are on the default Prometheus registry either way.
	svcmain.Metrics
}

// metricsAddrVar names the asr's metrics address.
const metricsAddrVar = "ALICIA_ASR_METRICS_ADDR"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Bus:           svcmain.DefaultBus(),
		URL:           engines.DefaultASRURL,
		Model:         engines.DefaultASRModel,
		Timeout:       15 * time.Second,
		Attempts:      3,
		RetryBackoff:  150 * time.Millisecond,
		MinConfidence: 0.3,
		Concurrency:   4,
		Consumer:      "asr",
		AckWait:       10 * time.Second,
		MaxDeliver:    5,
		PullWait:      time.Second,
	}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the asr command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	c.Metrics.From(src, metricsAddrVar)
	src.String("ALICIA_ASR_URL", &c.URL)
	src.String("ALICIA_ASR_MODEL", &c.Model)
	src.String("ALICIA_ASR_LANGUAGE", &c.Language)
	src.String("ALICIA_ASR_CONSUMER", &c.Consumer)
	err := errors.Join(
		c.Bus.From(src),
		src.Secret("ALICIA_ASR_API_KEY", &c.APIKey),
		src.Secret("ALICIA_POSTGRES_URL", &c.PostgresURL),
		src.Duration("ALICIA_ASR_TIMEOUT", &c.Timeout),
		src.Int("ALICIA_ASR_ATTEMPTS", &c.Attempts),
		src.Duration("ALICIA_ASR_RETRY_BACKOFF", &c.RetryBackoff),
		src.Float64("ALICIA_ASR_MIN_CONFIDENCE", &c.MinConfidence),
		src.Int("ALICIA_ASR_CONCURRENCY", &c.Concurrency),
		src.Duration("ALICIA_ASR_ACK_WAIT", &c.AckWait),
		src.Int("ALICIA_ASR_MAX_DELIVER", &c.MaxDeliver),
		src.Duration("ALICIA_ASR_PULL_WAIT", &c.PullWait),
	)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// BaseURL is URL ending in /v1, as go-openai wants it.
func (c Config) BaseURL() string { return engines.V1(c.URL) }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, c.Bus.Validate(), c.Metrics.Validate(metricsAddrVar))
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("ALICIA_ASR_URL %q is not an http(s) URL", c.URL)
	}
	if c.Model == "" {
		bad("model name is empty (ALICIA_ASR_MODEL)")
	}
	if c.Language != "" && (len(c.Language) < 2 || len(c.Language) > 3 || strings.ToLower(c.Language) != c.Language) {
		bad("ALICIA_ASR_LANGUAGE %q is not an ISO-639-1 code such as en", c.Language)
	}
	if c.Timeout <= 0 {
		bad("ALICIA_ASR_TIMEOUT must be positive")
	}
	if c.Attempts < 1 || c.Attempts > 10 {
		bad("ALICIA_ASR_ATTEMPTS %d is outside 1..10", c.Attempts)
	}
	if c.RetryBackoff < 0 {
		bad("ALICIA_ASR_RETRY_BACKOFF is negative")
	}
	if c.MinConfidence < 0 || c.MinConfidence > 1 {
		bad("ALICIA_ASR_MIN_CONFIDENCE %g is outside 0..1", c.MinConfidence)
	}
	if c.Concurrency < 1 || c.Concurrency > 256 {
		bad("ALICIA_ASR_CONCURRENCY %d is outside 1..256", c.Concurrency)
	}
	if !subjects.ValidToken(c.Consumer) {
		bad("ALICIA_ASR_CONSUMER %q is not a valid consumer name", c.Consumer)
	}
	if c.AckWait < time.Second {
		bad("ALICIA_ASR_ACK_WAIT %s is under 1s", c.AckWait)
	}
	if c.MaxDeliver < 1 {
		bad("ALICIA_ASR_MAX_DELIVER must be at least 1")
	}
	if c.PullWait < 50*time.Millisecond || c.PullWait > 30*time.Second {
		bad("ALICIA_ASR_PULL_WAIT %s is outside 50ms..30s", c.PullWait)
	}
	return errors.Join(errs...)
}

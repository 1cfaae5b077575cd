package llm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/llm/internal/judge"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
)

// JudgeConfig is the judge of answers (internal/judge): a worker of its own
// in every replica, on its own consumer, never on the turn path.
type JudgeConfig struct {
	// Sample is the share of answers judged, 0..1 (ALICIA_JUDGE_SAMPLE); 0
	// turns the judge off (its consumer is not even created).
	Sample float64
	// URL, Model and APIKey of the judge model (ALICIA_JUDGE_URL,
	// ALICIA_JUDGE_MODEL, ALICIA_JUDGE_API_KEY or _FILE). Empty: the
	// LLM's own; the LLM's key is used only when the URL is the LLM's too.
	URL, Model, APIKey string
	// Concurrency bounds the answers one replica judges at once
	// (ALICIA_JUDGE_CONCURRENCY).
	Concurrency int
	// Timeout bounds one judge request (ALICIA_JUDGE_TIMEOUT).
	Timeout time.Duration
}

// DefaultJudgeConfig: every answer judged, one at a time, by the LLM itself.
func DefaultJudgeConfig() JudgeConfig {
	return JudgeConfig{Sample: 0, Concurrency: 1, Timeout: 60 * time.Second}
}

// From overrides c with the ALICIA_JUDGE_* settings of src.
func (c *JudgeConfig) From(src config.Source) error {
	src.String("ALICIA_JUDGE_URL", &c.URL)
	src.String("ALICIA_JUDGE_MODEL", &c.Model)
	return errors.Join(
		src.Float64("ALICIA_JUDGE_SAMPLE", &c.Sample),
		src.Secret("ALICIA_JUDGE_API_KEY", &c.APIKey),
		src.Int("ALICIA_JUDGE_CONCURRENCY", &c.Concurrency),
		src.Duration("ALICIA_JUDGE_TIMEOUT", &c.Timeout),
	)
}

// Validate reports every problem at once.
func (c JudgeConfig) Validate() error {
	var errs []error
	if c.Sample < 0 || c.Sample > 1 || c.Sample != c.Sample {
		errs = append(errs, fmt.Errorf("ALICIA_JUDGE_SAMPLE %g is outside 0..1 (0: no judge)", c.Sample))
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("ALICIA_JUDGE_URL %q is not an http(s) URL (leave it unset for the LLM's)", c.URL))
		}
	}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("ALICIA_JUDGE_CONCURRENCY %d is outside 1..64", c.Concurrency))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("ALICIA_JUDGE_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// judgeEndpoint is the judge model's URL, name and key: the LLM's where unset.
func (c Config) judgeEndpoint() (u, model, key string) {
	u, model, key = c.Judge.URL, c.Judge.Model, c.Judge.APIKey
	if u == "" {
		u = c.LLMURL
		if key == "" {
			key = c.APIKey
		}
	}
	if model == "" {
		model = c.Model
	}
	return u, model, key
}

// startJudge runs the judge until ctx ends; stop waits for it. With
// ALICIA_JUDGE_SAMPLE=0 it runs nothing.
func startJudge(ctx context.Context, cfg Config, nc *nats.Conn, js jetstream.JetStream, db store.Querier, m *metrics.Metrics, log zerolog.Logger) (stop func()) {
	if cfg.Judge.Sample <= 0 {
		log.Info().Msg("judge off (ALICIA_JUDGE_SAMPLE=0)")
		return func() {}
	}
	u, model, key := cfg.judgeEndpoint()
	client := judge.NewClient(u, key, model, cfg.Judge.Timeout)
	log = log.With().Str("worker", "judge").Logger()
	c := &judge.Consumer{JS: js, Concurrency: cfg.Judge.Concurrency, Timeout: cfg.Judge.Timeout, Log: log,
		Judge: &judge.Judge{
			Turns: store.New(db), Model: client, Publisher: bus.NewPublisher(js), Metrics: m, Log: log, Sample: cfg.Judge.Sample,
			Applied: func(ctx context.Context, seq uint64) error {
				return rpc.WaitApplied(ctx, nc, bus.StreamConversations, seq)
			},
		}}
	jctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer client.Close()
		// The consumer is created at start; a failure (NATS not yet
		// reachable, permissions) is retried: the judge never stops turns.
		for jctx.Err() == nil {
			err := c.Run(jctx)
			if err == nil || jctx.Err() != nil {
				return
			}
			log.Error().Err(err).Msg("judge consumer failed; retrying in 5s")
			select {
			case <-jctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	log.Info().Str("model", model).Str("backend", u).Float64("sample", cfg.Judge.Sample).Int("concurrency", cfg.Judge.Concurrency).Msg("judge running")
	return func() { cancel(); <-done }
}

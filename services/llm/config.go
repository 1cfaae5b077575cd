// Package llm is the llm service: it takes turns (user messages and
// variations) off a partitioned work queue shared by all replicas, builds the
// context (system prompt, the branch's history, memories, tools), streams the
// model's answer sentence by sentence over JetStream, runs the tool loop, and
// stops at once on ControlStop. See README.md.
package llm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/llm/internal/timers"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// DefaultSystemPrompt is the system component's seed text: who Alicia is
// and how she answers, spoken or written (internal/prompts).
const DefaultSystemPrompt = `You are Alicia, a helpful voice assistant. Use the tools you have when they help, and say briefly what you found. If you do not know something, say so instead of guessing.`

// DefaultVoiceStyle is the voice_style component's seed text, added to the
// system prompt when the answer is spoken (StartAnswer answerType
// text+voice).
const DefaultVoiceStyle = `Your answers are read aloud, so speak in short, natural sentences that are easy to follow by ear. Do not use markdown: no tables, no headings, no bold text, and no bullet lists unless the user asks for a list; give code only when the user asks for code. Say numbers, symbols and abbreviations the way a person would say them.`

// DefaultDemonstrations is the demonstrations component's seed text: the
// instruction that will introduce stored turns used as few-shot examples.
const DefaultDemonstrations = `Here are earlier answers the person found good. Follow their manner (length, tone, how tools were used), not their content.`

// Toolbox is the tool registry a turn uses; tools.Registry is the real one.
type Toolbox interface {
	Available(ctx context.Context) []tools.Spec
	Call(ctx context.Context, name string, inv tools.Invocation, args map[string]any) (any, error)
	Timeout(name string) time.Duration
}

// Config of the llm service. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	// Postgres: ALICIA_POSTGRES_URL or ALICIA_POSTGRES_URL_FILE (read-only use).
	pgread.Postgres

	LLMURL string // ALICIA_LLM_URL: OpenAI-compatible base URL, e.g. http://vllm:8000/v1
	Model  string // ALICIA_LLM_MODEL
	APIKey string // ALICIA_LLM_API_KEY or ALICIA_LLM_API_KEY_FILE
	// SystemPrompt is the seed text of the system component
	// (ALICIA_LLM_SYSTEM_PROMPT): served until a version of it is promoted.
	SystemPrompt string
	// VoiceStyle is the seed text of the voice_style component
	// (ALICIA_LLM_VOICE_STYLE), added when the answer is spoken.
	VoiceStyle string
	// PromptReload: how often the active prompt versions are reloaded
	// from Postgres (ALICIA_LLM_PROMPT_RELOAD); a PromptVersion heard on
	// alicia.sys serves at once.
	PromptReload time.Duration
	MaxTokens    int // ALICIA_LLM_MAX_TOKENS (0: the backend's default)
	Temperature  *float32
	// Timeout bounds connecting, the first chunk and each gap between
	// chunks (ALICIA_LLM_TIMEOUT).
	Timeout time.Duration
	// Attempts per model request before anything was streamed (ALICIA_LLM_ATTEMPTS).
	Attempts     int
	RetryBackoff time.Duration // ALICIA_LLM_RETRY_BACKOFF: first retry delay, doubling
	// BreakerFailures consecutive failed requests open the circuit breaker
	// (ALICIA_LLM_BREAKER_FAILURES); after BreakerCooldown one probe goes
	// through (ALICIA_LLM_BREAKER_COOLDOWN).
	BreakerFailures   int
	BreakerCooldown   time.Duration
	MaxToolIterations int // ALICIA_LLM_MAX_TOOL_ITERATIONS

	// Partitions of the turn queue (ALICIA_LLM_PARTITIONS): the units the
	// replicas share the conversations in (each runs up to 16 turns at
	// once). Change it only when the queue is empty.
	Partitions int
	// AckWait: a turn whose replica stops heartbeating for this long goes
	// to another replica (ALICIA_LLM_ACK_WAIT).
	AckWait    time.Duration
	MaxDeliver int // ALICIA_LLM_MAX_DELIVER: tries of one turn
	// TurnsPerUser bounds the turns of one user running at once over every
	// replica (ALICIA_LLM_TURNS_PER_USER); the user's further turns wait
	// without holding up other users' (internal/queue). 0 turns the
	// budget off, and with it the fairness between users.
	TurnsPerUser int
	// ShutdownGrace lets running turns finish after a stop signal before
	// they are handed to another replica (ALICIA_LLM_SHUTDOWN_GRACE).
	ShutdownGrace time.Duration

	HistoryLimit    int           // ALICIA_LLM_HISTORY_LIMIT: messages of the branch in the prompt
	HistoryTimeout  time.Duration // ALICIA_LLM_HISTORY_TIMEOUT
	MemoryTopK      int           // ALICIA_LLM_MEMORY_TOP_K (0: no memories)
	MemoryThreshold float64       // ALICIA_LLM_MEMORY_THRESHOLD (0: the memory service's default)
	MemoryTimeout   time.Duration // ALICIA_LLM_MEMORY_TIMEOUT
	// Demonstrations: up to this many of the person's earlier turns they
	// up-voted or the judge scored at least DemonstrationsMinScore (mean
	// of correctness, faithfulness, relevancy), never down-voted, most
	// similar first, shown to the model as examples
	// (ALICIA_LLM_DEMONSTRATIONS; 0: off). Choosing them takes at most
	// DemonstrationsTimeout (ALICIA_LLM_DEMONSTRATIONS_TIMEOUT), else the
	// turn goes on without (ALICIA_LLM_DEMONSTRATIONS_MIN_SCORE).
	Demonstrations         int
	DemonstrationsMinScore float64
	DemonstrationsTimeout  time.Duration
	// MetricsAddr serves /metrics when set (ALICIA_LLM_METRICS_ADDR); the
	// metrics are on the default Prometheus registry either way.
	svcmain.Metrics

	Tools tools.Config // ALICIA_TOOL_*, ALICIA_WEB_SEARCH_*, ALICIA_MCP_*
	// Judge scores answers after they end (ALICIA_JUDGE_*; judge.go).
	Judge JudgeConfig
	// Optimizer improves the prompts from feedback (ALICIA_OPTIMIZER*;
	// optimizer.go).
	Optimizer OptimizerConfig
	// Titles names conversations from their content after their answers
	// (ALICIA_LLM_TITLES, default true; titles.go).
	Titles bool
	// Timers: the timer tools and their delivery (ALICIA_LLM_TIMERS_*,
	// ALICIA_TIME_ZONE; internal/timers).
	Timers timers.Config
	// Toolbox, when set, replaces the tool registry (tests, embedding);
	// the timer tools are then not offered (their delivery still runs).
	Toolbox Toolbox
}

// metricsAddrVar names the llm's metrics address.
const metricsAddrVar = "ALICIA_LLM_METRICS_ADDR"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Bus:               svcmain.DefaultBus(),
		LLMURL:            engines.DefaultLLMURL,
		Model:             engines.DefaultLLMModel,
		SystemPrompt:      DefaultSystemPrompt,
		VoiceStyle:        DefaultVoiceStyle,
		PromptReload:      5 * time.Second,
		Timeout:           60 * time.Second,
		Attempts:          3,
		RetryBackoff:      250 * time.Millisecond,
		BreakerFailures:   5,
		BreakerCooldown:   15 * time.Second,
		MaxToolIterations: 5,
		Partitions:        32,
		AckWait:           30 * time.Second,
		MaxDeliver:        5,
		TurnsPerUser:      4,
		ShutdownGrace:     10 * time.Second,
		HistoryLimit:      50,
		HistoryTimeout:    10 * time.Second,
		MemoryTopK:        5,
		MemoryTimeout:     500 * time.Millisecond,

		Demonstrations:         3,
		DemonstrationsMinScore: 0.8,
		DemonstrationsTimeout:  150 * time.Millisecond,
		Tools:                  tools.DefaultConfig(),
		Judge:                  DefaultJudgeConfig(),
		Optimizer:              DefaultOptimizerConfig(),
		Titles:                 true,
		Timers:                 timers.DefaultConfig(),
	}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the llm command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_LLM_URL", &c.LLMURL)
	src.String("ALICIA_LLM_MODEL", &c.Model)
	src.String("ALICIA_LLM_SYSTEM_PROMPT", &c.SystemPrompt)
	src.String("ALICIA_LLM_VOICE_STYLE", &c.VoiceStyle)
	src.String("ALICIA_TIME_ZONE", &c.Timers.TimeZone)
	c.Metrics.From(src, metricsAddrVar)
	tc, terr := tools.ConfigFrom(src)
	c.Tools = tc
	err := errors.Join(
		c.Bus.From(src),
		terr,
		c.Postgres.From(src),
		c.Judge.From(src),
		c.Optimizer.From(src),
		src.Secret("ALICIA_LLM_API_KEY", &c.APIKey),
		src.Int("ALICIA_LLM_MAX_TOKENS", &c.MaxTokens),
		temperature(src, &c.Temperature),
		src.Duration("ALICIA_LLM_TIMEOUT", &c.Timeout),
		src.Int("ALICIA_LLM_ATTEMPTS", &c.Attempts),
		src.Duration("ALICIA_LLM_RETRY_BACKOFF", &c.RetryBackoff),
		src.Int("ALICIA_LLM_BREAKER_FAILURES", &c.BreakerFailures),
		src.Duration("ALICIA_LLM_BREAKER_COOLDOWN", &c.BreakerCooldown),
		src.Int("ALICIA_LLM_MAX_TOOL_ITERATIONS", &c.MaxToolIterations),
		src.Int("ALICIA_LLM_PARTITIONS", &c.Partitions),
		src.Duration("ALICIA_LLM_ACK_WAIT", &c.AckWait),
		src.Int("ALICIA_LLM_MAX_DELIVER", &c.MaxDeliver),
		src.Int("ALICIA_LLM_TURNS_PER_USER", &c.TurnsPerUser),
		src.Duration("ALICIA_LLM_SHUTDOWN_GRACE", &c.ShutdownGrace),
		src.Int("ALICIA_LLM_HISTORY_LIMIT", &c.HistoryLimit),
		src.Duration("ALICIA_LLM_HISTORY_TIMEOUT", &c.HistoryTimeout),
		src.Int("ALICIA_LLM_MEMORY_TOP_K", &c.MemoryTopK),
		src.Float64("ALICIA_LLM_MEMORY_THRESHOLD", &c.MemoryThreshold),
		src.Duration("ALICIA_LLM_MEMORY_TIMEOUT", &c.MemoryTimeout),
		src.Duration("ALICIA_LLM_PROMPT_RELOAD", &c.PromptReload),
		src.Int("ALICIA_LLM_DEMONSTRATIONS", &c.Demonstrations),
		src.Bool("ALICIA_LLM_TITLES", &c.Titles),
		src.Int("ALICIA_LLM_TIMERS_PER_USER", &c.Timers.PerUser),
		src.Duration("ALICIA_LLM_TIMERS_MAX_AHEAD", &c.Timers.MaxAhead),
		src.Duration("ALICIA_LLM_TIMERS_CLAIM_TIMEOUT", &c.Timers.ClaimTimeout),
		src.Duration("ALICIA_LLM_TIMERS_RESYNC", &c.Timers.Resync),
		src.Float64("ALICIA_LLM_DEMONSTRATIONS_MIN_SCORE", &c.DemonstrationsMinScore),
		src.Duration("ALICIA_LLM_DEMONSTRATIONS_TIMEOUT", &c.DemonstrationsTimeout),
	)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

func temperature(src config.Source, dst **float32) error {
	if !src.IsSet("ALICIA_LLM_TEMPERATURE") {
		return nil
	}
	var f float64
	if err := src.Float64("ALICIA_LLM_TEMPERATURE", &f); err != nil {
		return err
	}
	t := float32(f)
	*dst = &t
	return nil
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, c.Bus.Validate(), c.Postgres.Validate(), c.Metrics.Validate(metricsAddrVar), c.Judge.Validate(), c.Optimizer.Validate(),
		c.Timers.Validate())
	if u, err := url.Parse(c.LLMURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("ALICIA_LLM_URL %q is not an http(s) URL", c.LLMURL)
	}
	if c.Model == "" {
		bad("model name is empty (ALICIA_LLM_MODEL)")
	}
	if c.SystemPrompt == "" {
		bad("system prompt is empty (ALICIA_LLM_SYSTEM_PROMPT)")
	}
	if c.PromptReload < 100*time.Millisecond {
		bad("ALICIA_LLM_PROMPT_RELOAD %s is under 100ms", c.PromptReload)
	}
	if c.MaxTokens < 0 {
		bad("ALICIA_LLM_MAX_TOKENS %d is negative", c.MaxTokens)
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2) {
		bad("ALICIA_LLM_TEMPERATURE %g is outside 0..2", *c.Temperature)
	}
	if c.Timeout <= 0 {
		bad("ALICIA_LLM_TIMEOUT must be positive")
	}
	if c.Attempts < 1 || c.Attempts > 10 {
		bad("ALICIA_LLM_ATTEMPTS %d is outside 1..10", c.Attempts)
	}
	if c.RetryBackoff < 0 {
		bad("ALICIA_LLM_RETRY_BACKOFF is negative")
	}
	if c.BreakerFailures < 1 {
		bad("ALICIA_LLM_BREAKER_FAILURES must be at least 1")
	}
	if c.BreakerCooldown <= 0 {
		bad("ALICIA_LLM_BREAKER_COOLDOWN must be positive")
	}
	if c.MaxToolIterations < 0 || c.MaxToolIterations > 50 {
		bad("ALICIA_LLM_MAX_TOOL_ITERATIONS %d is outside 0..50", c.MaxToolIterations)
	}
	if c.Partitions < 1 || c.Partitions > 1024 {
		bad("ALICIA_LLM_PARTITIONS %d is outside 1..1024", c.Partitions)
	}
	if c.AckWait < time.Second {
		bad("ALICIA_LLM_ACK_WAIT %s is under 1s", c.AckWait)
	}
	if c.TurnsPerUser < 0 {
		bad("ALICIA_LLM_TURNS_PER_USER %d: want ≥ 1 (or 0: no budget)", c.TurnsPerUser)
	}
	if c.MaxDeliver < 1 {
		bad("ALICIA_LLM_MAX_DELIVER must be at least 1")
	}
	if c.ShutdownGrace < 0 {
		bad("ALICIA_LLM_SHUTDOWN_GRACE is negative")
	}
	if c.HistoryLimit < 1 {
		bad("ALICIA_LLM_HISTORY_LIMIT must be at least 1")
	}
	if c.HistoryTimeout <= 0 || c.MemoryTimeout <= 0 {
		bad("ALICIA_LLM_HISTORY_TIMEOUT and ALICIA_LLM_MEMORY_TIMEOUT must be positive")
	}
	if c.MemoryTopK < 0 || c.MemoryTopK > 50 {
		bad("ALICIA_LLM_MEMORY_TOP_K %d is outside 0..50", c.MemoryTopK)
	}
	if c.MemoryThreshold < 0 || c.MemoryThreshold > 1 {
		bad("ALICIA_LLM_MEMORY_THRESHOLD %g is outside 0..1", c.MemoryThreshold)
	}
	if c.Demonstrations < 0 || c.Demonstrations > 10 {
		bad("ALICIA_LLM_DEMONSTRATIONS %d is outside 0..10", c.Demonstrations)
	}
	if c.DemonstrationsMinScore < 0 || c.DemonstrationsMinScore > 1 {
		bad("ALICIA_LLM_DEMONSTRATIONS_MIN_SCORE %g is outside 0..1", c.DemonstrationsMinScore)
	}
	if c.Demonstrations > 0 && c.DemonstrationsTimeout <= 0 {
		bad("ALICIA_LLM_DEMONSTRATIONS_TIMEOUT must be positive (or ALICIA_LLM_DEMONSTRATIONS=0: none)")
	}
	if c.Toolbox == nil {
		if err := c.Tools.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

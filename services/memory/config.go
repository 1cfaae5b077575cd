// Package memory is Alicia's long-term memory: it embeds text over an
// OpenAI-compatible /v1/embeddings endpoint, answers memory.search with a
// pgvector HNSW search (pinned memories first), applies MemoryActions from the
// REST API (memory.action) and from clients, and extracts durable facts about
// the user after each completed turn. It reads Postgres through a read-only
// session and writes only by publishing MemoryActions for persistence.
package memory

import (
	"errors"
	"fmt"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/svcmain"
)

// Config of the memory service. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	// Postgres: ALICIA_POSTGRES_URL (+ _FILE); read-only sessions.
	pgread.Postgres

	// EmbeddingURL is an OpenAI-compatible base URL ending in /v1
	// (ALICIA_EMBEDDING_URL). Empty turns search and extraction off.
	EmbeddingURL    string
	EmbeddingModel  string // ALICIA_EMBEDDING_MODEL, default BAAI/bge-m3 (1024 dimensions)
	EmbeddingAPIKey string // ALICIA_EMBEDDING_API_KEY (+ _FILE)
	// EmbeddingTimeout bounds one embeddings request (ALICIA_EMBEDDING_TIMEOUT, default 5s);
	// failed requests are retried twice with backoff.
	EmbeddingTimeout time.Duration

	LLMURL    string // ALICIA_LLM_URL: OpenAI-compatible base URL for extraction
	LLMModel  string // ALICIA_LLM_MODEL
	LLMAPIKey string // ALICIA_LLM_API_KEY (+ _FILE)
	// LLMTimeout bounds one extraction request (ALICIA_MEMORY_LLM_TIMEOUT, default 60s).
	LLMTimeout time.Duration

	// TopK is how many memories a search returns by default (ALICIA_MEMORY_TOP_K, default 5).
	TopK int
	// MaxTopK caps a request's topK (ALICIA_MEMORY_MAX_TOP_K, default 50).
	MaxTopK int
	// Threshold is the least cosine similarity of a match (ALICIA_MEMORY_THRESHOLD, default 0.35).
	Threshold float64
	// DuplicateThreshold is the similarity from which an extracted memory
	// updates the nearest existing one instead of creating a new one
	// (ALICIA_MEMORY_DUPLICATE_THRESHOLD, default 0.85).
	DuplicateThreshold float64
	// RatingWeight is how much similarity each star of a person's rating
	// above (below) 3 adds to (takes from) a memory when search orders its
	// matches (ALICIA_MEMORY_RATING_WEIGHT, default 0.02; 0 ignores ratings).
	RatingWeight float64
	// EfSearch is hnsw.ef_search for searches (ALICIA_MEMORY_EF_SEARCH, default 64).
	EfSearch int
	// Extraction extracts memories after each turn when an LLM URL and an
	// embeddings URL are set (ALICIA_MEMORY_EXTRACTION, default true).
	Extraction bool

	// ActionConsumer is the durable consumer of client MemoryActions, shared
	// by replicas (ALICIA_MEMORY_ACTION_CONSUMER, default "memory").
	ActionConsumer string
	// ExtractionConsumer is the durable consumer of final answers
	// (ALICIA_MEMORY_EXTRACTION_CONSUMER, default "memory-extraction").
	ExtractionConsumer string

	// Prefetch starts the memory search of every user message when it is
	// published, for the llm's memory.search of its turn to take
	// (ALICIA_MEMORY_PREFETCH, default true; needs an embeddings URL).
	Prefetch bool
	// PrefetchTTL, PrefetchSettle and PrefetchEntries tune the prefetched
	// searches (services/memory/internal/prefetch): zero takes the
	// defaults (5 s, 30 s, 1024). Not read from the environment.
	PrefetchTTL     time.Duration
	PrefetchSettle  time.Duration
	PrefetchEntries int

	// MetricsAddr serves /metrics and /healthz when set (ALICIA_MEMORY_METRICS_ADDR).
	svcmain.Metrics
}

// metricsAddrVar names the memory's metrics address.
const metricsAddrVar = "ALICIA_MEMORY_METRICS_ADDR"

// Dimensions is the size of every embedding (the alicia_memory.embeddings column).
const Dimensions = 1024

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Bus:                svcmain.DefaultBus(),
		EmbeddingModel:     engines.DefaultEmbeddingModel,
		EmbeddingTimeout:   5 * time.Second,
		LLMModel:           engines.DefaultLLMModel,
		LLMTimeout:         60 * time.Second,
		TopK:               5,
		MaxTopK:            50,
		Threshold:          0.35,
		DuplicateThreshold: 0.85,
		RatingWeight:       0.02,
		EfSearch:           64,
		Extraction:         true,
		Prefetch:           true,
		ActionConsumer:     "memory",
		ExtractionConsumer: "memory-extraction",
	}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the memory command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_EMBEDDING_URL", &c.EmbeddingURL)
	src.String("ALICIA_EMBEDDING_MODEL", &c.EmbeddingModel)
	src.String("ALICIA_LLM_URL", &c.LLMURL)
	src.String("ALICIA_LLM_MODEL", &c.LLMModel)
	src.String("ALICIA_MEMORY_ACTION_CONSUMER", &c.ActionConsumer)
	src.String("ALICIA_MEMORY_EXTRACTION_CONSUMER", &c.ExtractionConsumer)
	c.Metrics.From(src, metricsAddrVar)
	err := errors.Join(
		c.Bus.From(src),
		c.Postgres.From(src),
		src.Secret("ALICIA_EMBEDDING_API_KEY", &c.EmbeddingAPIKey),
		src.Secret("ALICIA_LLM_API_KEY", &c.LLMAPIKey),
		src.Duration("ALICIA_EMBEDDING_TIMEOUT", &c.EmbeddingTimeout),
		src.Duration("ALICIA_MEMORY_LLM_TIMEOUT", &c.LLMTimeout),
		src.Int("ALICIA_MEMORY_TOP_K", &c.TopK),
		src.Int("ALICIA_MEMORY_MAX_TOP_K", &c.MaxTopK),
		src.Int("ALICIA_MEMORY_EF_SEARCH", &c.EfSearch),
		src.Float64("ALICIA_MEMORY_THRESHOLD", &c.Threshold),
		src.Float64("ALICIA_MEMORY_DUPLICATE_THRESHOLD", &c.DuplicateThreshold),
		src.Float64("ALICIA_MEMORY_RATING_WEIGHT", &c.RatingWeight),
		src.Bool("ALICIA_MEMORY_EXTRACTION", &c.Extraction),
		src.Bool("ALICIA_MEMORY_PREFETCH", &c.Prefetch),
	)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	errs := []error{c.Bus.Validate(), c.Postgres.Validate(), c.Metrics.Validate(metricsAddrVar)}
	if c.EmbeddingURL != "" && c.EmbeddingModel == "" {
		errs = append(errs, errors.New("embedding model is empty (ALICIA_EMBEDDING_MODEL)"))
	}
	if c.LLMURL != "" && c.LLMModel == "" {
		errs = append(errs, errors.New("LLM model is empty (ALICIA_LLM_MODEL)"))
	}
	if c.EmbeddingTimeout <= 0 {
		errs = append(errs, fmt.Errorf("embedding timeout %s must be positive (ALICIA_EMBEDDING_TIMEOUT)", c.EmbeddingTimeout))
	}
	if c.LLMTimeout <= 0 {
		errs = append(errs, fmt.Errorf("LLM timeout %s must be positive (ALICIA_MEMORY_LLM_TIMEOUT)", c.LLMTimeout))
	}
	if c.MaxTopK < 1 || c.MaxTopK > 1000 {
		errs = append(errs, fmt.Errorf("max top-k %d is outside 1..1000 (ALICIA_MEMORY_MAX_TOP_K)", c.MaxTopK))
	}
	if c.TopK < 1 || c.TopK > c.MaxTopK {
		errs = append(errs, fmt.Errorf("top-k %d is outside 1..%d (ALICIA_MEMORY_TOP_K)", c.TopK, c.MaxTopK))
	}
	if c.Threshold < 0 || c.Threshold > 1 {
		errs = append(errs, fmt.Errorf("threshold %g is outside 0..1 (ALICIA_MEMORY_THRESHOLD)", c.Threshold))
	}
	if c.RatingWeight < 0 || c.RatingWeight > 0.25 {
		errs = append(errs, fmt.Errorf("rating weight %g is outside 0..0.25 (ALICIA_MEMORY_RATING_WEIGHT); a rating should only nudge the order", c.RatingWeight))
	}
	if c.DuplicateThreshold <= 0 || c.DuplicateThreshold > 1 {
		errs = append(errs, fmt.Errorf("duplicate threshold %g is outside (0, 1] (ALICIA_MEMORY_DUPLICATE_THRESHOLD)", c.DuplicateThreshold))
	}
	if c.EfSearch < 1 || c.EfSearch > 1000 {
		errs = append(errs, fmt.Errorf("ef_search %d is outside 1..1000 (ALICIA_MEMORY_EF_SEARCH)", c.EfSearch))
	}
	if c.PrefetchTTL < 0 || c.PrefetchSettle < 0 || c.PrefetchEntries < 0 {
		errs = append(errs, errors.New("prefetch TTL, settle time and entries must not be negative"))
	}
	if c.ActionConsumer == "" || c.ExtractionConsumer == "" {
		errs = append(errs, errors.New("consumer names must not be empty"))
	}
	return errors.Join(errs...)
}

// searchEnabled reports whether an embeddings backend is configured.
func (c Config) searchEnabled() bool { return c.EmbeddingURL != "" }

// prefetchEnabled reports whether searches are prefetched.
func (c Config) prefetchEnabled() bool { return c.Prefetch && c.searchEnabled() }

// extractionEnabled reports whether memories are extracted after each turn.
func (c Config) extractionEnabled() bool {
	return c.Extraction && c.LLMURL != "" && c.EmbeddingURL != ""
}

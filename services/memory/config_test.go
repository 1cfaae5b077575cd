package memory_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/memory"
)

func TestConfigFromEnv(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(secret, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_NATS_URL", "nats://nats:4222")
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://ro@db/alicia")
	t.Setenv("ALICIA_EMBEDDING_URL", "http://emb:8000/v1")
	t.Setenv("ALICIA_EMBEDDING_API_KEY_FILE", secret)
	t.Setenv("ALICIA_LLM_URL", "http://llm:8000/v1")
	t.Setenv("ALICIA_LLM_MODEL", "qwen")
	t.Setenv("ALICIA_MEMORY_TOP_K", "8")
	t.Setenv("ALICIA_MEMORY_THRESHOLD", "0.5")
	t.Setenv("ALICIA_EMBEDDING_TIMEOUT", "750ms")
	c, err := memory.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.NATSURL != "nats://nats:4222" || c.PostgresURL != "postgres://ro@db/alicia" || c.EmbeddingURL != "http://emb:8000/v1" ||
		c.EmbeddingAPIKey != "sk-file" || c.EmbeddingModel != "BAAI/bge-m3" || c.LLMModel != "qwen" || c.TopK != 8 ||
		c.Threshold != 0.5 || c.EmbeddingTimeout != 750*time.Millisecond || !c.Extraction || c.DuplicateThreshold != 0.85 {
		t.Fatalf("config = %+v", c)
	}
	t.Setenv("ALICIA_MEMORY_EXTRACTION", "false")
	if c, err := memory.ConfigFromEnv(); err != nil || c.Extraction {
		t.Fatalf("ALICIA_MEMORY_EXTRACTION=false: %+v, %v", c, err)
	}
	t.Setenv("ALICIA_MEMORY_THRESHOLD", "high")
	if _, err := memory.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "ALICIA_MEMORY_THRESHOLD") {
		t.Fatalf("bad threshold: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := memory.DefaultConfig()
	ok.PostgresURL = "postgres://x/y"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with a Postgres URL: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*memory.Config)
		want   string
	}{
		{"no postgres", func(c *memory.Config) { c.PostgresURL = "" }, "ALICIA_POSTGRES_URL"},
		{"no nats", func(c *memory.Config) { c.NATSURL = "" }, "ALICIA_NATS_URL"},
		{"top-k above the cap", func(c *memory.Config) { c.TopK = 60 }, "ALICIA_MEMORY_TOP_K"},
		{"threshold above 1", func(c *memory.Config) { c.Threshold = 1.2 }, "ALICIA_MEMORY_THRESHOLD"},
		{"duplicate threshold 0", func(c *memory.Config) { c.DuplicateThreshold = 0 }, "ALICIA_MEMORY_DUPLICATE_THRESHOLD"},
		{"embedding URL without a model", func(c *memory.Config) { c.EmbeddingURL, c.EmbeddingModel = "http://e/v1", "" }, "ALICIA_EMBEDDING_MODEL"},
		{"ef_search 0", func(c *memory.Config) { c.EfSearch = 0 }, "ALICIA_MEMORY_EF_SEARCH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.change(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %s", err, c.want)
			}
		})
	}
	// Every problem at once.
	bad := memory.DefaultConfig()
	bad.TopK, bad.Threshold = 0, -1
	if err := bad.Validate(); err == nil || strings.Count(err.Error(), "\n") < 2 {
		t.Fatalf("err = %v, want three problems", err)
	}
}

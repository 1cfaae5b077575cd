package llm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/llm"
)

func TestConfigFromEnv(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://u@127.0.0.1/db")
	t.Setenv("ALICIA_LLM_URL", "http://vllm:8000/v1")
	t.Setenv("ALICIA_LLM_MODEL", "some/model")
	t.Setenv("ALICIA_LLM_API_KEY_FILE", key)
	t.Setenv("ALICIA_LLM_TEMPERATURE", "0.3")
	t.Setenv("ALICIA_LLM_PARTITIONS", "64")
	t.Setenv("ALICIA_LLM_TIMEOUT", "20s")
	t.Setenv("ALICIA_LLM_MAX_TOOL_ITERATIONS", "3")
	cfg, err := llm.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLMURL != "http://vllm:8000/v1" || cfg.Model != "some/model" || cfg.APIKey != "sk-from-file" ||
		cfg.Temperature == nil || *cfg.Temperature != 0.3 || cfg.Partitions != 64 || cfg.Timeout != 20*time.Second ||
		cfg.MaxToolIterations != 3 || cfg.NATSURL != "nats://127.0.0.1:4222" || !strings.Contains(cfg.SystemPrompt, "voice assistant") {
		t.Fatalf("config %+v", cfg)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := llm.DefaultConfig()
	ok.PostgresURL = "postgres://x"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with a database: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(*llm.Config)
		wants string
	}{
		{"no postgres", func(c *llm.Config) { c.PostgresURL = "" }, "ALICIA_POSTGRES_URL"},
		{"bad url", func(c *llm.Config) { c.LLMURL = "vllm:8000" }, "ALICIA_LLM_URL"},
		{"no partitions", func(c *llm.Config) { c.Partitions = 0 }, "ALICIA_LLM_PARTITIONS"},
		{"short ack wait", func(c *llm.Config) { c.AckWait = time.Millisecond }, "ALICIA_LLM_ACK_WAIT"},
		{"no attempts", func(c *llm.Config) { c.Attempts = 0 }, "ALICIA_LLM_ATTEMPTS"},
		{"breaker", func(c *llm.Config) { c.BreakerFailures = 0 }, "ALICIA_LLM_BREAKER_FAILURES"},
		{"every problem at once", func(c *llm.Config) { c.Model, c.Timeout = "", 0 }, "ALICIA_LLM_TIMEOUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.wants) {
				t.Fatalf("err = %v, want it to name %s", err, c.wants)
			}
		})
	}
	bad := ok
	bad.Model, bad.Timeout = "", 0
	if err := bad.Validate(); !strings.Contains(err.Error(), "ALICIA_LLM_MODEL") {
		t.Fatalf("err = %v: want both problems", err)
	}
}

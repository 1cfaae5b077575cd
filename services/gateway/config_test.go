package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway"
)

func TestConfigFromEnv(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "emb-key")
	if err := os.WriteFile(keyFile, []byte("emb-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "me:0123456789abcdef")
	t.Setenv("ALICIA_LLM_URL", "http://vllm:8000/v1")
	t.Setenv("ALICIA_LLM_MODEL", "qwen")
	t.Setenv("ALICIA_LLM_API_KEY", "llm-secret")
	t.Setenv("ALICIA_EMBEDDING_URL", "https://emb.example/v1")
	t.Setenv("ALICIA_EMBEDDING_API_KEY_FILE", keyFile)
	t.Setenv("ALICIA_WRITE_TIMEOUT", "3s")
	c, err := gateway.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM != (gateway.Backend{URL: "http://vllm:8000/v1", Model: "qwen", APIKey: "llm-secret"}) ||
		c.Embeddings.APIKey != "emb-secret" || c.ASR.URL != "" || c.WriteTimeout != 3*time.Second {
		t.Fatalf("config %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	base := gateway.DefaultConfig()
	base.PostgresURL, base.APIKeys = "postgres://x@127.0.0.1/db", "me:0123456789abcdef"
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*gateway.Config)
		want string
	}{
		{"llm URL without scheme", func(c *gateway.Config) { c.LLM.URL = "vllm:8000/v1" }, "ALICIA_LLM_URL"},
		{"tts URL not http", func(c *gateway.Config) { c.TTS.URL = "ftp://tts/v1" }, "ALICIA_TTS_URL"},
		{"asr URL without host", func(c *gateway.Config) { c.ASR.URL = "http:///v1" }, "ALICIA_ASR_URL"},
		{"write timeout", func(c *gateway.Config) { c.WriteTimeout = 0 }, "ALICIA_WRITE_TIMEOUT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.edit(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want an error naming %s", err, c.want)
			}
		})
	}
}

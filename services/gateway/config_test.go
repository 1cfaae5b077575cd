package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/tts"
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
	for _, k := range []string{"ALICIA_ASR_URL", "ALICIA_ASR_MODEL", "ALICIA_TTS_ENGINE", "ALICIA_TTS_URL", "ALICIA_TTS_MODEL", "ALICIA_TTS_VOICE", "ALICIA_ESPEAK_PATH",
		"ALICIA_SESSION_TTL", "ALICIA_COOKIE_SECURE", "ALICIA_ALLOWED_ORIGINS"} {
		t.Setenv(k, "")
	}
	c, err := gateway.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionTTL != 7*24*time.Hour || c.CookieSecure || c.AllowedOrigins != nil {
		t.Fatalf("session defaults: ttl %s, secure %v, origins %v", c.SessionTTL, c.CookieSecure, c.AllowedOrigins)
	}
	t.Setenv("ALICIA_SESSION_TTL", "12h")
	t.Setenv("ALICIA_COOKIE_SECURE", "true")
	t.Setenv("ALICIA_ALLOWED_ORIGINS", "https://app.example.com, *.lan:5173")
	if s, err := gateway.ConfigFromEnv(); err != nil || s.SessionTTL != 12*time.Hour || !s.CookieSecure ||
		len(s.AllowedOrigins) != 2 || s.AllowedOrigins[1] != "*.lan:5173" {
		t.Fatalf("session config %v %v %v: %v", s.SessionTTL, s.CookieSecure, s.AllowedOrigins, err)
	}
	if c.LLM != (engines.Engine{Kind: engines.OpenAI, URL: "http://vllm:8000/v1", Model: "qwen", APIKey: "llm-secret"}) ||
		c.Embeddings.APIKey != "emb-secret" || c.Embeddings.Model != "BAAI/bge-m3" || c.WriteTimeout != 3*time.Second {
		t.Fatalf("config %+v", c)
	}
}

// TestModelsAsTheServicesReadThem: the gateway reads the asr's and the
// tts's variables with their defaults, so server-info describes the
// engines they run.
func TestModelsAsTheServicesReadThem(t *testing.T) {
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "me:0123456789abcdef")
	vars := []string{"ALICIA_ASR_URL", "ALICIA_ASR_MODEL", "ALICIA_TTS_ENGINE", "ALICIA_TTS_URL", "ALICIA_TTS_MODEL", "ALICIA_TTS_VOICE", "ALICIA_ESPEAK_PATH"}
	for _, c := range []struct {
		name     string
		env      map[string]string
		asr, tts engines.Engine
		ttsName  string
	}{
		{name: "defaults",
			asr:     engines.Engine{Kind: engines.OpenAI, URL: "http://127.0.0.1:8000/v1", Model: "whisper-large-v3"},
			tts:     engines.Engine{Kind: engines.OpenAI, URL: "http://127.0.0.1:8000/v1", Model: "kokoro", Voice: "af_sarah", Path: "espeak-ng"},
			ttsName: "kokoro (voice af_sarah)"},
		{name: "espeak-ng",
			env:     map[string]string{"ALICIA_TTS_ENGINE": "espeak", "ALICIA_ESPEAK_PATH": "/opt/espeak-ng"},
			asr:     engines.Engine{Kind: engines.OpenAI, URL: "http://127.0.0.1:8000/v1", Model: "whisper-large-v3"},
			tts:     engines.Engine{Kind: engines.Espeak, URL: "http://127.0.0.1:8000/v1", Model: "kokoro", Voice: "en-us", Path: "/opt/espeak-ng"},
			ttsName: "espeak-ng (voice en-us)"},
		{name: "servers without /v1",
			env: map[string]string{"ALICIA_ASR_URL": "http://speaches:8000", "ALICIA_ASR_MODEL": "Systran/faster-whisper-large-v3",
				"ALICIA_TTS_URL": "http://speaches:8000/", "ALICIA_TTS_MODEL": "speaches-ai/Kokoro-82M-v1.0-ONNX", "ALICIA_TTS_VOICE": "bf_emma"},
			asr:     engines.Engine{Kind: engines.OpenAI, URL: "http://speaches:8000/v1", Model: "Systran/faster-whisper-large-v3"},
			tts:     engines.Engine{Kind: engines.OpenAI, URL: "http://speaches:8000/v1", Model: "speaches-ai/Kokoro-82M-v1.0-ONNX", Voice: "bf_emma", Path: "espeak-ng"},
			ttsName: "speaches-ai/Kokoro-82M-v1.0-ONNX (voice bf_emma)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range vars {
				t.Setenv(k, c.env[k])
			}
			g, err := gateway.ConfigFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			if g.ASR != c.asr || g.TTS != c.tts || g.TTS.Name() != c.ttsName {
				t.Fatalf("asr %+v tts %+v (%s), want %+v %+v (%s)", g.ASR, g.TTS, g.TTS.Name(), c.asr, c.tts, c.ttsName)
			}
			// The tts reads the same engine, model and voice.
			s, err := tts.ConfigFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			voice := s.Voice
			if voice == "" {
				voice = tts.DefaultVoice(s.Engine)
			}
			if s.Engine != g.TTS.Kind || s.Model != g.TTS.Model || voice != g.TTS.Voice || engines.V1(s.URL) != g.TTS.URL {
				t.Fatalf("tts service reads %+v", s)
			}
		})
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
		{"unknown tts engine", func(c *gateway.Config) { c.TTS.Kind = "piper" }, "ALICIA_TTS_ENGINE"},
		{"espeak without a path", func(c *gateway.Config) { c.TTS.Kind, c.TTS.Path = engines.Espeak, "" }, "ALICIA_ESPEAK_PATH"},
		{"espeak for the llm", func(c *gateway.Config) { c.LLM.Kind = engines.Espeak }, "LLM engine"},
		{"session ttl too short", func(c *gateway.Config) { c.SessionTTL = time.Second }, "ALICIA_SESSION_TTL"},
		{"session ttl too long", func(c *gateway.Config) { c.SessionTTL = 400 * 24 * time.Hour }, "ALICIA_SESSION_TTL"},
		{"bad origin pattern", func(c *gateway.Config) { c.AllowedOrigins = []string{"[app.example.com"} }, "ALICIA_ALLOWED_ORIGINS"},
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

package asr_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/asr"
)

func TestConfigFromEnv(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("sk-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"ALICIA_NATS_URL":           "nats://nats:4222",
		"ALICIA_ASR_URL":            "http://speaches:8000",
		"ALICIA_ASR_MODEL":          "Systran/faster-whisper-small",
		"ALICIA_ASR_API_KEY_FILE":   key,
		"ALICIA_ASR_LANGUAGE":       "fr",
		"ALICIA_ASR_TIMEOUT":        "5s",
		"ALICIA_ASR_MIN_CONFIDENCE": "0.45",
		"ALICIA_ASR_CONCURRENCY":    "8",
		"ALICIA_ASR_ACK_WAIT":       "20s",
	} {
		t.Setenv(k, v)
	}
	c, err := asr.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.NATSURL != "nats://nats:4222" || c.Model != "Systran/faster-whisper-small" || c.APIKey != "sk-test" || c.Language != "fr" ||
		c.Timeout != 5*time.Second || c.MinConfidence != 0.45 || c.Concurrency != 8 || c.AckWait != 20*time.Second || c.Consumer != "asr" {
		t.Errorf("config %+v", c)
	}
	if c.BaseURL() != "http://speaches:8000/v1" {
		t.Errorf("base URL %q", c.BaseURL())
	}
}

func TestConfigDefaults(t *testing.T) {
	c := asr.DefaultConfig()
	if c.Model != "whisper-large-v3" || c.AckWait != 10*time.Second || c.Concurrency != 4 || c.BaseURL() != "http://127.0.0.1:8000/v1" {
		t.Errorf("defaults %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*asr.Config)
		want   string
	}{
		{"no NATS", func(c *asr.Config) { c.NATSURL = "" }, "ALICIA_NATS_URL"},
		{"URL without scheme", func(c *asr.Config) { c.URL = "speaches:8000" }, "ALICIA_ASR_URL"},
		{"no model", func(c *asr.Config) { c.Model = "" }, "ALICIA_ASR_MODEL"},
		{"language name", func(c *asr.Config) { c.Language = "English" }, "ALICIA_ASR_LANGUAGE"},
		{"floor above 1", func(c *asr.Config) { c.MinConfidence = 1.5 }, "ALICIA_ASR_MIN_CONFIDENCE"},
		{"no concurrency", func(c *asr.Config) { c.Concurrency = 0 }, "ALICIA_ASR_CONCURRENCY"},
		{"short ack wait", func(c *asr.Config) { c.AckWait = 100 * time.Millisecond }, "ALICIA_ASR_ACK_WAIT"},
		{"consumer with a dot", func(c *asr.Config) { c.Consumer = "asr.1" }, "ALICIA_ASR_CONSUMER"},
		{"no attempts", func(c *asr.Config) { c.Attempts = 0 }, "ALICIA_ASR_ATTEMPTS"},
		{"pull wait too short", func(c *asr.Config) { c.PullWait = time.Millisecond }, "ALICIA_ASR_PULL_WAIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := asr.DefaultConfig()
			tc.change(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
	// Every problem at once.
	c := asr.DefaultConfig()
	c.NATSURL, c.Model = "", ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ALICIA_NATS_URL") || !strings.Contains(err.Error(), "ALICIA_ASR_MODEL") {
		t.Errorf("err = %v", err)
	}
}

func TestConfigFromEnvErrors(t *testing.T) {
	t.Setenv("ALICIA_ASR_MIN_CONFIDENCE", "high")
	t.Setenv("ALICIA_ASR_CONCURRENCY", "many")
	_, err := asr.ConfigFromEnv()
	if err == nil || !strings.Contains(err.Error(), "ALICIA_ASR_MIN_CONFIDENCE") || !strings.Contains(err.Error(), "ALICIA_ASR_CONCURRENCY") {
		t.Errorf("err = %v", err)
	}
}

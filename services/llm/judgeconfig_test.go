package llm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/services/llm"
)

// TestJudgeConfig: the ALICIA_JUDGE_* settings, their defaults and what
// Validate refuses.
func TestJudgeConfig(t *testing.T) {
	base := map[string]string{"ALICIA_POSTGRES_URL": "postgres://u@127.0.0.1/db"}
	src := func(extra map[string]string) config.Source {
		return config.Lookup("test", func(string) (string, bool) { return "", false }).Overlay("base", base).Overlay("test", extra)
	}
	cfg, err := llm.ConfigFrom(src(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.JudgeConfig{Sample: 0, Concurrency: 1, Timeout: 60 * time.Second}); cfg.Judge != want {
		t.Fatalf("defaults %+v, want %+v (URL, model and key: the LLM's)", cfg.Judge, want)
	}
	cfg, err = llm.ConfigFrom(src(map[string]string{"ALICIA_JUDGE_SAMPLE": "0.25", "ALICIA_JUDGE_URL": "http://judge:8000/v1",
		"ALICIA_JUDGE_MODEL": "judge-model", "ALICIA_JUDGE_API_KEY": "k", "ALICIA_JUDGE_CONCURRENCY": "3", "ALICIA_JUDGE_TIMEOUT": "5s"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.JudgeConfig{Sample: 0.25, URL: "http://judge:8000/v1", Model: "judge-model", APIKey: "k", Concurrency: 3, Timeout: 5 * time.Second}); cfg.Judge != want {
		t.Fatalf("read %+v, want %+v", cfg.Judge, want)
	}
	for name, c := range map[string]struct{ key, value, wants string }{
		"sample above 1":   {"ALICIA_JUDGE_SAMPLE", "1.5", "ALICIA_JUDGE_SAMPLE"},
		"negative sample":  {"ALICIA_JUDGE_SAMPLE", "-0.1", "ALICIA_JUDGE_SAMPLE"},
		"bad url":          {"ALICIA_JUDGE_URL", "judge:8000", "ALICIA_JUDGE_URL"},
		"no concurrency":   {"ALICIA_JUDGE_CONCURRENCY", "0", "ALICIA_JUDGE_CONCURRENCY"},
		"no timeout":       {"ALICIA_JUDGE_TIMEOUT", "0s", "ALICIA_JUDGE_TIMEOUT"},
		"sample not a num": {"ALICIA_JUDGE_SAMPLE", "all", "ALICIA_JUDGE_SAMPLE"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := llm.ConfigFrom(src(map[string]string{c.key: c.value}))
			if err == nil || !strings.Contains(err.Error(), c.wants) {
				t.Fatalf("err = %v, want it to name %s", err, c.wants)
			}
		})
	}
}

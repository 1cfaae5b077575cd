package devcmd

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestExports: what fake-models tells the user to export before `alicia
// up`. Nothing when it serves the defaults (up calls the LLM and the ASR
// there and finds the speech and embedding models there by itself); a
// variable only where up, in the same shell, would look elsewhere.
func TestExports(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		flag func(*FakeModelsConfig)
		want []string
	}{
		{name: "the defaults"},
		{name: "the same URLs set in the shell", env: map[string]string{"ALICIA_LLM_URL": "http://127.0.0.1:8000/v1", "ALICIA_TTS_URL": "http://127.0.0.1:8000/v1"}},
		{name: "the LLM elsewhere: its embeddings too, which up does not look for there",
			env:  map[string]string{"ALICIA_LLM_URL": "http://127.0.0.1:9000/v1"},
			want: []string{"ALICIA_EMBEDDING_URL=http://127.0.0.1:9000/v1"}},
		{name: "a URL by flag", flag: func(c *FakeModelsConfig) { c.TTS.URL = "http://127.0.0.1:9001" },
			want: []string{"ALICIA_TTS_URL=http://127.0.0.1:9001"}},
		{name: "espeak-ng chosen in the shell", env: map[string]string{"ALICIA_TTS_ENGINE": "espeak"}, want: []string{"ALICIA_TTS_ENGINE=openai"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"ALICIA_LLM_URL", "ALICIA_LLM_MODEL", "ALICIA_ASR_URL", "ALICIA_ASR_MODEL", "ALICIA_TTS_URL", "ALICIA_TTS_MODEL",
				"ALICIA_TTS_ENGINE", "ALICIA_EMBEDDING_URL", "ALICIA_EMBEDDING_MODEL"} {
				t.Setenv(k, c.env[k])
			}
			cfg := FakeModelsConfigFromEnv()
			if c.flag != nil {
				c.flag(&cfg)
			}
			lns, err := cfg.plan()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			printFakeModels(&out, lns, cfg.roles(), cfg.Profile)
			if got := exports(cfg.roles()); !slices.Equal(got, c.want) {
				t.Errorf("exports %q, want %q", got, c.want)
			}
			switch printed := out.String(); {
			case len(c.want) == 0 && (strings.Contains(printed, "export") || !strings.Contains(printed, "it uses all of these, with nothing to set")):
				t.Errorf("printed:\n%s", printed)
			case len(c.want) > 0 && !strings.Contains(printed, "  export "+strings.Join(c.want, " ")+"\n"):
				t.Errorf("printed:\n%s\nwant export %s", printed, strings.Join(c.want, " "))
			}
		})
	}
}

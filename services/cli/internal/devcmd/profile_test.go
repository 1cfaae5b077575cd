package devcmd_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/devcmd"
)

// --profile takes a profile's name; instant is the default, an unknown
// name is an error that lists the known ones.
func TestProfileFlag(t *testing.T) {
	parse := func(args ...string) (fakeopenai.Profile, error) {
		var p fakeopenai.Profile
		fs := flag.NewFlagSet("fake-models", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(devcmd.ProfileFlag{P: &p}, "profile", "model timing")
		return p, fs.Parse(args)
	}
	if p, err := parse(); err != nil || !p.IsInstant() || (devcmd.ProfileFlag{P: &p}).String() != "instant" {
		t.Errorf("no flag: %+v, %v; want instant", p, err)
	}
	if p, err := parse("--profile", "instant"); err != nil || p != fakeopenai.Instant || !p.IsInstant() {
		t.Errorf("--profile instant: %+v, %v", p, err)
	}
	if p, err := parse("--profile=gpu-box"); err != nil || p != fakeopenai.GPUBox || (devcmd.ProfileFlag{P: &p}).String() != "gpu-box" {
		t.Errorf("--profile=gpu-box: %+v, %v", p, err)
	}
	_, err := parse("--profile", "a100")
	if err == nil || !strings.Contains(err.Error(), `"a100"`) || !strings.Contains(err.Error(), "known: gpu-box, instant") {
		t.Errorf("--profile a100: %v; want an error naming the known profiles", err)
	}
	if (devcmd.ProfileFlag{}).Type() == "" || (devcmd.ProfileFlag{}).String() != "instant" {
		t.Error("ProfileFlag: want a type for the help and instant as the default")
	}
}

// With the gpu-box profile, fake-models says so and its chat answers
// after the profile's time to first token (a lower bound only).
func TestFakeModelsGPUBox(t *testing.T) {
	cleanEnv(t)
	addr := testkit.FreeAddr(t)
	cfg := devcmd.FakeModelsConfigFromEnv()
	cfg.Profile = fakeopenai.GPUBox
	cfg.LLM.URL, cfg.ASR.URL, cfg.TTS.URL = "http://"+addr+"/v1", "http://"+addr+"/v1", "http://"+addr
	out := runFakeModels(t, cfg)
	if !strings.Contains(out, "timing profile gpu-box") {
		t.Errorf("banner does not name the profile:\n%s", out)
	}
	req := openai.ChatCompletionRequest{Model: cfg.LLM.Model, Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}}
	start := time.Now()
	st, err := client(cfg.LLM.URL).CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("no content: %v", err)
		}
		if len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
			break
		}
	}
	if first := time.Since(start); first < fakeopenai.GPUBox.Chat.TimeToFirstToken {
		t.Errorf("first word after %s, before the time to first token %s", first, fakeopenai.GPUBox.Chat.TimeToFirstToken)
	}
}

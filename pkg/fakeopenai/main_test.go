package fakeopenai_test

import (
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client is go-openai pointed at the fake, as a service would configure it.
func client(s *fakeopenai.Server, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = s.URL()
	return openai.NewClientWithConfig(cfg)
}

func userMessage(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    "qwen",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	}
}

package fakeopenai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// streamed is what a client assembled from one stream.
type streamed struct {
	chunks    int
	reasoning string
	content   string
	calls     []openai.ToolCall
	finish    openai.FinishReason
	usage     *openai.Usage
}

// collect reads a stream to the end, assembling tool calls by index the way
// a service must.
func collect(t *testing.T, ctx context.Context, c *openai.Client, req openai.ChatCompletionRequest) streamed {
	t.Helper()
	req.Stream = true
	st, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	defer st.Close()
	var out streamed
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		out.chunks++
		if resp.Usage != nil {
			out.usage = resp.Usage
		}
		for _, ch := range resp.Choices {
			out.reasoning += ch.Delta.ReasoningContent
			out.content += ch.Delta.Content
			if ch.FinishReason != "" {
				out.finish = ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				i := *tc.Index
				for len(out.calls) <= i {
					out.calls = append(out.calls, openai.ToolCall{})
				}
				if tc.ID != "" {
					out.calls[i].ID, out.calls[i].Type = tc.ID, tc.Type
				}
				out.calls[i].Function.Name += tc.Function.Name
				out.calls[i].Function.Arguments += tc.Function.Arguments
			}
		}
	}
}

func TestStreamText(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Text("Hello there. The answer is 4.2, see https://example.com."))
	got := collect(t, t.Context(), client(s, ""), userMessage("hi"))
	if got.content != "Hello there. The answer is 4.2, see https://example.com." {
		t.Errorf("content = %q", got.content)
	}
	if got.chunks < 8 || got.finish != openai.FinishReasonStop {
		t.Errorf("chunks = %d, finish = %q; want word by word, stop", got.chunks, got.finish)
	}
	if s.Pending() != 0 {
		t.Errorf("pending = %d, want the turn used", s.Pending())
	}
}

func TestStreamReasoning(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Turn{Reasoning: []string{"The user", " greets me."}, Text: fakeopenai.Words("Hi!")})
	got := collect(t, t.Context(), client(s, ""), userMessage("hello"))
	if got.reasoning != "The user greets me." || got.content != "Hi!" {
		t.Errorf("reasoning = %q, content = %q", got.reasoning, got.content)
	}
}

func TestStreamToolCalls(t *testing.T) {
	s := fakeopenai.New(t)
	weather := `{"city":"Zürich","unit":"celsius","days":[1,2,3]}`
	s.Enqueue(fakeopenai.Calls(
		fakeopenai.ToolCall{Name: "get_weather", Arguments: weather},
		fakeopenai.ToolCall{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"2*(3+4)"}`},
	))
	got := collect(t, t.Context(), client(s, ""), userMessage("weather and maths"))
	if got.finish != openai.FinishReasonToolCalls || len(got.calls) != 2 {
		t.Fatalf("finish = %q, calls = %+v", got.finish, got.calls)
	}
	first, second := got.calls[0], got.calls[1]
	if first.ID == "" || first.Type != openai.ToolTypeFunction || first.Function.Name != "get_weather" || first.Function.Arguments != weather {
		t.Errorf("first call = %+v", first)
	}
	if second.ID != "call_calc" || second.Function.Arguments != `{"expression":"2*(3+4)"}` {
		t.Errorf("second call = %+v", second)
	}
	if !json.Valid([]byte(first.Function.Arguments)) {
		t.Errorf("arguments are not JSON: %q", first.Function.Arguments)
	}
}

func TestStreamUsage(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Turn{Text: []string{"ok"}, Usage: &fakeopenai.Usage{PromptTokens: 12, CompletionTokens: 1}})
	req := userMessage("hi")
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	got := collect(t, t.Context(), client(s, ""), req)
	if got.usage == nil || got.usage.PromptTokens != 12 || got.usage.TotalTokens != 13 {
		t.Errorf("usage = %+v", got.usage)
	}
}

func TestNonStreaming(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Turn{
		Reasoning: []string{"think"},
		Text:      fakeopenai.Words("Let me check."),
		ToolCalls: []fakeopenai.ToolCall{{Name: "web_search", Arguments: `{"q":"go"}`}},
	})
	resp, err := client(s, "").CreateChatCompletion(t.Context(), userMessage("search go"))
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if msg.Content != "Let me check." || msg.ReasoningContent != "think" || resp.Choices[0].FinishReason != openai.FinishReasonToolCalls {
		t.Errorf("message = %+v, finish = %q", msg, resp.Choices[0].FinishReason)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != `{"q":"go"}` || msg.ToolCalls[0].ID == "" {
		t.Errorf("tool calls = %+v", msg.ToolCalls)
	}
	if resp.Object != "chat.completion" || resp.Usage.TotalTokens == 0 {
		t.Errorf("object = %q, usage = %+v", resp.Object, resp.Usage)
	}
}

// A tool loop: the matcher on the tool result picks the final answer, the
// in-order queue answers what no matcher takes.
func TestMatchers(t *testing.T) {
	s := fakeopenai.New(t)
	s.Enqueue(fakeopenai.Text("first in order"), fakeopenai.Text("second in order"))
	s.On(fakeopenai.HasToolResult(), fakeopenai.Text("It is sunny."))
	s.On(fakeopenai.All(fakeopenai.LastUserContains("weather"), fakeopenai.HasTools()),
		fakeopenai.Calls(fakeopenai.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{}`}))
	c := client(s, "")
	tools := []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "get_weather"}}}

	ask := userMessage("what's the weather?")
	ask.Tools = tools
	got := collect(t, t.Context(), c, ask)
	if len(got.calls) != 1 || got.calls[0].Function.Name != "get_weather" {
		t.Fatalf("first answer = %+v, want a tool call", got)
	}
	ask.Messages = append(ask.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: got.calls},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: "call_1", Content: `{"sky":"clear"}`})
	if got := collect(t, t.Context(), c, ask); got.content != "It is sunny." {
		t.Errorf("after the tool result = %q", got.content)
	}
	for _, want := range []string{"first in order", "second in order"} {
		if got := collect(t, t.Context(), c, userMessage("anything")); got.content != want {
			t.Errorf("queued answer = %q, want %q", got.content, want)
		}
	}
	_, err := c.CreateChatCompletion(t.Context(), userMessage("one too many"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusInternalServerError || !strings.Contains(apiErr.Message, "no scripted turn") {
		t.Errorf("unscripted request: err = %v", err)
	}
}

func TestRepeatAndFallback(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("fallback")))
	s.AddScript(fakeopenai.Script{Match: fakeopenai.LastUserContains("ping"), Turns: []fakeopenai.Turn{fakeopenai.Text("pong")}, Repeat: true})
	c := client(s, "")
	for range 3 {
		if got := collect(t, t.Context(), c, userMessage("ping")); got.content != "pong" {
			t.Errorf("repeat = %q", got.content)
		}
	}
	if got := collect(t, t.Context(), c, userMessage("other")); got.content != "fallback" {
		t.Errorf("fallback = %q", got.content)
	}
}

func TestRecordsRequests(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithAPIKey("sk-test"))
	s.Enqueue(fakeopenai.Text("a"), fakeopenai.Text("b"))
	c := client(s, "sk-test")
	req := openai.ChatCompletionRequest{
		Model: "qwen2.5-7b",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "You are Alicia."},
			{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: "multi part"}}},
		},
		Tools: []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: "calculator", Description: "Evaluates arithmetic.", Parameters: json.RawMessage(`{"type":"object"}`)}}},
	}
	collect(t, t.Context(), c, req)
	if _, err := c.CreateChatCompletion(t.Context(), userMessage("plain")); err != nil {
		t.Fatal(err)
	}

	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Model != "qwen2.5-7b" || !r.Stream || len(r.Messages) != 2 || r.Messages[0].Content != "You are Alicia." || r.LastUser() != "multi part" {
		t.Errorf("first request = %+v", r)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "calculator" || string(r.Tools[0].Parameters) != `{"type":"object"}` {
		t.Errorf("tools = %+v", r.Tools)
	}
	if r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("authorization = %q", r.Header.Get("Authorization"))
	}
	if reqs[1].Stream || reqs[1].LastUser() != "plain" {
		t.Errorf("second request = %+v", reqs[1])
	}
}

func TestAPIKey(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithAPIKey("sk-right"))
	_, err := client(s, "sk-wrong").ListModels(t.Context())
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: err = %v, want 401", err)
	}
	models, err := client(s, "sk-right").ListModels(t.Context())
	if err != nil || len(models.Models) != 2 || models.Models[0].ID != "fake-chat" {
		t.Fatalf("models = %+v, err = %v", models, err)
	}
}

// TestResponder: a responder answers from the request what no script
// takes; scripts still come first.
func TestResponder(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithResponder(func(r fakeopenai.Request) fakeopenai.Turn {
		return fakeopenai.Text("You said " + r.LastUser() + ".")
	}))
	s.On(fakeopenai.LastUserContains("ping"), fakeopenai.Text("pong"))
	c := client(s, "")
	if got := collect(t, t.Context(), c, userMessage("ping")); got.content != "pong" {
		t.Errorf("scripted = %q, want pong", got.content)
	}
	for _, text := range []string{"ping", "hello there"} {
		if got := collect(t, t.Context(), c, userMessage(text)); got.content != "You said "+text+"." || got.chunks < 3 {
			t.Errorf("responder for %q = %q in %d chunks", text, got.content, got.chunks)
		}
	}
}

// TestWithoutRecording: a fake that keeps no requests still answers every
// endpoint, and its logs stay empty.
func TestWithoutRecording(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithoutRecording(), fakeopenai.WithFallback(fakeopenai.Text("ok")))
	c := client(s, "")
	if got := collect(t, t.Context(), c, userMessage("hi")); got.content != "ok" {
		t.Fatalf("chat = %q", got.content)
	}
	if _, err := c.CreateEmbeddings(t.Context(), openai.EmbeddingRequestStrings{Input: []string{"hi"}, Model: "e"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateSpeech(t.Context(), openai.CreateSpeechRequest{Model: "kokoro", Input: "hi", Voice: "af_sarah", ResponseFormat: openai.SpeechResponseFormatPcm})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(res); err != nil || len(b) == 0 {
		t.Fatalf("speech: %d bytes, %v", len(b), err)
	}
	res.Close()
	if n := len(s.Requests()) + len(s.EmbeddingRequests()) + s.SpeechCount() + s.TranscriptionCount(); n != 0 {
		t.Errorf("%d requests recorded, want none", n)
	}
}

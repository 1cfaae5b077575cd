package judge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sashabaranov/go-openai"
)

// Client asks an OpenAI-compatible chat model for a judgement.
type Client struct {
	api   *openai.Client
	conns *http.Transport
	model string
}

// NewClient returns a client of model at baseURL (ending in /v1); timeout
// bounds connecting (each request's context bounds the rest).
func NewClient(baseURL, apiKey, model string, timeout time.Duration) *Client {
	oc := openai.DefaultConfig(apiKey)
	oc.BaseURL = strings.TrimRight(baseURL, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	oc.HTTPClient = &http.Client{Transport: tr}
	return &Client{api: openai.NewClientWithConfig(oc), conns: tr, model: model}
}

// Model is the judge model's name.
func (c *Client) Model() string { return c.model }

// Close releases idle connections.
func (c *Client) Close() { c.conns.CloseIdleConnections() }

// Reply is the judge model's answer and its token accounting.
type Reply struct {
	Content                  string
	PromptTokens, Completion int
}

// Complete sends one judge request (JSON output, greedy). A 4xx other than
// 408/429 is ErrRejected; any other failure is worth retrying later.
func (c *Client) Complete(ctx context.Context, p Prompt) (Reply, error) {
	resp, err := c.api.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: c.model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: p.System},
			{Role: openai.ChatMessageRoleUser, Content: p.User},
		},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
		// Greedy decoding; go-openai omits a zero temperature.
		Temperature: math.SmallestNonzeroFloat32,
		MaxTokens:   300, //nolint:staticcheck // SA1019: max_tokens, which every OpenAI-compatible server reads
	})
	if err != nil {
		var apiErr *openai.APIError
		if errors.As(err, &apiErr) && apiErr.HTTPStatusCode >= 400 && apiErr.HTTPStatusCode < 500 &&
			apiErr.HTTPStatusCode != http.StatusRequestTimeout && apiErr.HTTPStatusCode != http.StatusTooManyRequests {
			return Reply{}, fmt.Errorf("%w: %w", ErrRejected, err)
		}
		return Reply{}, fmt.Errorf("judge: request: %w", err)
	}
	if len(resp.Choices) == 0 {
		return Reply{}, fmt.Errorf("%w: no choices", ErrMalformed)
	}
	return Reply{Content: resp.Choices[0].Message.Content, PromptTokens: resp.Usage.PromptTokens, Completion: resp.Usage.CompletionTokens}, nil
}

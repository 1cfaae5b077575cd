// Package model talks to an OpenAI-compatible chat completions backend
// (vLLM, llama.cpp, OpenAI) with go-openai: streamed answers with reasoning
// and tool calls, an idle timeout between chunks, retries with backoff
// before anything was streamed, and a circuit breaker.
package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Config of the client.
type Config struct {
	BaseURL string // e.g. http://vllm:8000/v1
	APIKey  string
	Model   string
	// Timeout bounds connecting, the wait for the first chunk and every gap
	// between chunks (not the whole answer).
	Timeout time.Duration
	// Attempts is how many times a request is tried before anything was
	// streamed from it (1 = no retry).
	Attempts int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
	// MaxTokens caps one answer (0: the backend's default).
	MaxTokens int
	// Temperature (nil: the backend's default).
	Temperature *float32
}

// Client streams chat completions.
type Client struct {
	oc      *openai.Client
	http    *http.Client
	cfg     Config
	breaker *Breaker
}

// New returns a client; breaker may be shared by several clients of one backend.
func New(cfg Config, breaker *Breaker) *Client {
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.MaxIdleConnsPerHost = 128
	tr.ForceAttemptHTTP2 = false
	hc := &http.Client{Transport: tr}
	oc.HTTPClient = hc
	return &Client{oc: openai.NewClientWithConfig(oc), http: hc, cfg: cfg, breaker: breaker}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Breaker returns the client's circuit breaker.
func (c *Client) Breaker() *Breaker { return c.breaker }

// Request is one chat completion request.
type Request struct {
	Messages []openai.ChatCompletionMessage
	Tools    []openai.Tool
}

// Delta is one streamed piece of the answer: reasoning_content or content.
type Delta struct {
	Reasoning string
	Content   string
}

// Result is how a streamed request ended.
type Result struct {
	ToolCalls    []openai.ToolCall
	FinishReason openai.FinishReason
	Attempts     int
	// Streamed is true once a delta was handed to the caller: a failure
	// after that is not retried (the words are out).
	Streamed bool
	Usage    *openai.Usage
}

// Stream runs req and calls onDelta for every piece of text, in order.
// Errors: the caller's context error (stop, shutdown); ErrUnavailable
// (wrapping the last cause) when the backend could not answer; ErrRejected
// when it refused the request.
func (c *Client) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Result, error) {
	// The caller's span (llm.model_request) names the model asked.
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("gen_ai.system", "openai"), attribute.String("gen_ai.request.model", c.cfg.Model))
	var res Result
	attempts := max(c.cfg.Attempts, 1)
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		res.Attempts = attempt
		if attempt > 1 {
			if err := wait(ctx, c.backoff(attempt-1)); err != nil {
				return res, err
			}
		}
		ticket, err := c.breaker.Allow()
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		err = c.attempt(ctx, req, &res, onDelta)
		switch {
		case err == nil:
			ticket.Success()
			return res, nil
		case ctx.Err() != nil:
			ticket.Cancel()
			return res, context.Cause(ctx)
		case errors.Is(err, ErrRejected):
			ticket.Success() // the backend is up; the request is wrong
			return res, err
		}
		ticket.Failure()
		last = err
		if res.Streamed {
			break
		}
	}
	return res, fmt.Errorf("%w: %w", ErrUnavailable, last)
}

func (c *Client) attempt(ctx context.Context, req Request, res *Result, onDelta func(Delta)) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(c.cfg.Timeout, func() { cancel(ErrIdleTimeout) })
	defer idle.Stop()

	creq := openai.ChatCompletionRequest{
		Model:         c.cfg.Model,
		Messages:      req.Messages,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		MaxTokens:     c.cfg.MaxTokens, //nolint:staticcheck // SA1019: max_tokens, which every OpenAI-compatible server (vLLM, llama.cpp, fakeopenai) reads; max_completion_tokens is OpenAI's newer name, not read by all
	}
	if c.cfg.Temperature != nil {
		creq.Temperature = *c.cfg.Temperature
	}
	if len(req.Tools) > 0 {
		creq.Tools, creq.ToolChoice = req.Tools, "auto"
	}
	st, err := c.oc.CreateChatCompletionStream(actx, creq)
	if err != nil {
		return classify(actx, err)
	}
	defer st.Close()
	res.ToolCalls, res.FinishReason, res.Usage = nil, "", nil
	var calls callAssembler
	for {
		idle.Reset(c.cfg.Timeout)
		chunk, err := st.Recv()
		idle.Stop()
		if errors.Is(err, io.EOF) {
			if res.FinishReason == "" {
				return ErrTruncated // cut before [DONE] or before a finish reason
			}
			res.ToolCalls = calls.done()
			return nil
		}
		if err != nil {
			return classify(actx, err)
		}
		if chunk.Usage != nil {
			res.Usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.FinishReason != "" {
				res.FinishReason = ch.FinishReason
			}
			calls.add(ch.Delta.ToolCalls)
			if ch.Delta.ReasoningContent != "" || ch.Delta.Content != "" {
				res.Streamed = true
				onDelta(Delta{Reasoning: ch.Delta.ReasoningContent, Content: ch.Delta.Content})
			}
		}
	}
}

// classify turns a transport or API error into ErrRejected or a retryable
// cause; the attempt context's cause tells an idle timeout from a stop.
func classify(actx context.Context, err error) error {
	if cause := context.Cause(actx); errors.Is(cause, ErrIdleTimeout) {
		return ErrIdleTimeout
	}
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return err
}

func (c *Client) backoff(retry int) time.Duration {
	d := c.cfg.Backoff << (retry - 1)
	if d <= 0 {
		return 0
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1)) // up to 20% less, so replicas do not retry in step
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Reachable asks the backend for its model list (a cheap health probe).
func (c *Client) Reachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	_, err := c.oc.ListModels(ctx)
	return err
}

// callAssembler joins tool calls streamed in pieces, by index.
type callAssembler struct{ calls []openai.ToolCall }

func (a *callAssembler) add(deltas []openai.ToolCall) {
	for i, d := range deltas {
		idx := i
		if d.Index != nil {
			idx = *d.Index
		}
		if idx < 0 || idx > 128 {
			continue
		}
		for len(a.calls) <= idx {
			a.calls = append(a.calls, openai.ToolCall{Type: openai.ToolTypeFunction})
		}
		c := &a.calls[idx]
		if d.ID != "" {
			c.ID = d.ID
		}
		if d.Type != "" {
			c.Type = d.Type
		}
		c.Function.Name += d.Function.Name
		c.Function.Arguments += d.Function.Arguments
	}
}

func (a *callAssembler) done() []openai.ToolCall {
	out := a.calls[:0:0]
	for _, c := range a.calls {
		if c.Function.Name != "" {
			out = append(out, c)
		}
	}
	return out
}

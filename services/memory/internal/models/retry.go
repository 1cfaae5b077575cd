package models

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// retryPolicy retries calls that failed for a reason another attempt can fix.
type retryPolicy struct {
	attempts int           // calls in all, the first included
	backoff  time.Duration // before the second call; doubled each time
	timeout  time.Duration // of one call
}

// do calls f until it succeeds, fails permanently, the attempts are spent or
// ctx ends. Each call gets its own timeout.
func (p retryPolicy) do(ctx context.Context, what string, f func(ctx context.Context) error) error {
	delay := p.backoff
	var last error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, p.timeout)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if !retryable(err) {
			return fmt.Errorf("%s: %w: %w", what, ErrRejected, err)
		}
		last = err
		if attempt >= p.attempts {
			break
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
		delay *= 2
	}
	return fmt.Errorf("%s: %w after %d attempts: %w", what, ErrUnavailable, p.attempts, last)
}

// retryable: 5xx, 429 and transport errors (refused, reset, timeout) are
// worth another attempt; other HTTP errors are the request's fault.
func retryable(err error) bool {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode > 0 {
		return statusRetryable(apiErr.HTTPStatusCode)
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode > 0 {
		return statusRetryable(reqErr.HTTPStatusCode)
	}
	return true
}

func statusRetryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// newClient is a go-openai client for an OpenAI-compatible base URL, with
// its own connection pool.
func newClient(baseURL, apiKey string) (*openai.Client, *http.Transport) {
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = baseURL
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cfg.HTTPClient = &http.Client{Transport: tr}
	return openai.NewClientWithConfig(cfg), tr
}

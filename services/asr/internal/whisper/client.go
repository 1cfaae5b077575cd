// Package whisper transcribes speech with an OpenAI-compatible
// /v1/audio/transcriptions backend (Whisper behind speaches, OpenAI) through
// go-openai: a WAV upload asking for verbose_json, quick retries of
// transient failures, and a confidence made from the segment statistics.
package whisper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Config of the client.
type Config struct {
	BaseURL string // e.g. http://speaches:8000/v1
	APIKey  string
	Model   string
	// Timeout bounds one attempt, upload included.
	Timeout time.Duration
	// Attempts is how many times a transient failure is tried (1 = no retry).
	Attempts int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
}

// Client transcribes audio. It is safe for concurrent use.
type Client struct {
	oc   *openai.Client
	http *http.Client
	cfg  Config
}

// New returns a client.
func New(cfg Config) *Client {
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.MaxIdleConnsPerHost = 64
	hc := &http.Client{Transport: tr}
	oc.HTTPClient = hc
	if cfg.Attempts < 1 {
		cfg.Attempts = 1
	}
	return &Client{oc: openai.NewClientWithConfig(oc), http: hc, cfg: cfg}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Request is one transcription.
type Request struct {
	WAV      []byte
	Language string // ISO-639-1 hint; empty: detected
	Prompt   string
	// Attempts overrides Config.Attempts when positive (a partial
	// transcript is not worth a retry: the next one is due soon).
	Attempts int
}

// Segment is what the backend says about one stretch of speech.
type Segment struct {
	Start, End       float64 // seconds
	AvgLogprob       float64
	NoSpeechProb     float64
	CompressionRatio float64
}

// Result is a transcription.
type Result struct {
	Text     string // trimmed
	Language string // ISO-639-1 when the backend named one ("english" → "en")
	Duration time.Duration
	Segments []Segment
	// Confidence is 0..1 from the segments, nil when the backend gave none.
	Confidence *float64
	Attempts   int
}

// Transcribe uploads req.WAV and returns the transcript. Errors wrap
// ErrUnavailable or ErrRejected, or are the context's when ctx ended.
func (c *Client) Transcribe(ctx context.Context, req Request) (Result, error) {
	attempts := c.cfg.Attempts
	if req.Attempts > 0 {
		attempts = req.Attempts
	}
	delay := c.cfg.Backoff
	var last error
	for i := 1; i <= attempts; i++ {
		res, err := c.once(ctx, req)
		if err == nil {
			res.Attempts = i
			return res, nil
		}
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		retry, cause := classify(err)
		if !retry {
			return Result{}, cause
		}
		last = cause
		if i == attempts {
			break
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		delay *= 2
	}
	return Result{}, fmt.Errorf("after %d attempts: %w", attempts, last)
}

func (c *Client) once(ctx context.Context, req Request) (Result, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.oc.CreateTranscription(actx, openai.AudioRequest{
		Model: c.cfg.Model, FilePath: "speech.wav", Reader: bytes.NewReader(req.WAV),
		Format: openai.AudioResponseFormatVerboseJSON, Language: req.Language, Prompt: req.Prompt,
		TimestampGranularities: []openai.TranscriptionTimestampGranularity{openai.TranscriptionTimestampGranularitySegment},
	})
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return Result{}, fmt.Errorf("%w: no answer within %s", errAttemptTimeout, c.cfg.Timeout)
		}
		return Result{}, err
	}
	res := Result{Text: strings.TrimSpace(resp.Text), Language: NormalizeLanguage(resp.Language),
		Duration: time.Duration(resp.Duration * float64(time.Second))}
	for _, s := range resp.Segments {
		res.Segments = append(res.Segments, Segment{Start: s.Start, End: s.End, AvgLogprob: s.AvgLogprob,
			NoSpeechProb: s.NoSpeechProb, CompressionRatio: s.CompressionRatio})
	}
	res.Confidence = Confidence(res.Segments)
	return res, nil
}

var errAttemptTimeout = errors.New("attempt timed out")

// classify says whether err is worth another attempt and what it means.
func classify(err error) (retry bool, cause error) {
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	switch {
	case status == 0: // transport: refused, reset, timed out, cut, garbage
		return true, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return true, fmt.Errorf("%w: HTTP %d: %w", ErrUnavailable, status, err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound:
		// A wrong key, URL or model name: the backend is unusable as configured.
		return false, fmt.Errorf("%w: HTTP %d: %w", ErrUnavailable, status, err)
	default:
		return false, fmt.Errorf("%w: HTTP %d: %w", ErrRejected, status, err)
	}
}

// Reachable asks the backend for its model list, so a wrong URL shows at start.
func (c *Client) Reachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if _, err := c.oc.ListModels(ctx); err != nil {
		var apiErr *openai.APIError
		if errors.As(err, &apiErr) && apiErr.HTTPStatusCode == http.StatusNotFound {
			return nil // answers, just has no model list
		}
		return err
	}
	return nil
}

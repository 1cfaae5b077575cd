package synth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// OpenAIConfig configures the OpenAI-compatible backend.
type OpenAIConfig struct {
	// URL of the server, with or without the /v1 suffix.
	URL    string
	APIKey string
	Model  string
	Voice  string
	// Format asked for: "pcm" (24 kHz mono s16le, streamed as is) or "wav"
	// (parsed as it streams and resampled to 24 kHz when needed).
	Format string
}

// OpenAI synthesises with POST {URL}/v1/audio/speech (speaches with Kokoro
// in production) and streams the response body as it arrives.
type OpenAI struct {
	c   *openai.Client
	cfg OpenAIConfig
	hc  *http.Client
}

// NewOpenAI returns the backend. Requests are bounded by their context, not
// by a client timeout, so a long sentence may stream for as long as it needs.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	base := strings.TrimRight(cfg.URL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = base
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	hc := &http.Client{Transport: tr}
	oc.HTTPClient = hc
	if cfg.Format == "" {
		cfg.Format = "pcm"
	}
	return &OpenAI{c: openai.NewClientWithConfig(oc), cfg: cfg, hc: hc}
}

// Close releases idle connections.
func (o *OpenAI) Close() { o.hc.CloseIdleConnections() }

// Engine names the backend and model for SentenceAudio.engine.
func (o *OpenAI) Engine() string { return "openai:" + o.cfg.Model }

// Synthesize asks for text in voice v (its name and speed; the API takes
// no language: a voice speaks one) and emits PCM while the body streams
// in. Cancelling ctx aborts the request.
func (o *OpenAI) Synthesize(ctx context.Context, text string, v Voice, emit Emit) error {
	voice := o.cfg.Voice
	if v.Name != "" {
		voice = v.Name
	}
	res, err := o.c.CreateSpeech(ctx, openai.CreateSpeechRequest{
		Model:          openai.SpeechModel(o.cfg.Model),
		Input:          text,
		Voice:          openai.SpeechVoice(voice),
		ResponseFormat: openai.SpeechResponseFormat(o.cfg.Format),
		Speed:          v.Speed, // 0 is left out: the server's 1
	})
	if err != nil {
		return classify(ctx, err)
	}
	defer res.Close() //nolint:errcheck // the speech response's body, only read
	if o.cfg.Format == "wav" {
		_, err = readWAV(res, emit)
	} else {
		err = copyPCM(res, emit)
	}
	if err != nil && !errors.Is(err, ErrNoAudio) && !errors.Is(err, ErrBadAudio) {
		return classify(ctx, err)
	}
	return err
}

// copyPCM emits the body as it arrives.
func copyPCM(r io.Reader, emit Emit) error {
	buf := make([]byte, 16<<10)
	total := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += n
			if eerr := emit(buf[:n]); eerr != nil {
				return eerr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if total < 2 {
		return ErrNoAudio
	}
	return nil
}

// classify sorts a request error: a status under 500 other than 408 and
// 429 is a refusal, anything else (5xx, network, timeout) is worth a retry.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	status := 0
	var api *openai.APIError
	var req *openai.RequestError
	switch {
	case errors.As(err, &api):
		status = api.HTTPStatusCode
	case errors.As(err, &req):
		status = req.HTTPStatusCode
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

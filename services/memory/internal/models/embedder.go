// Package models holds the clients of the model backends the memory service
// uses over OpenAI-compatible HTTP APIs: the embedder (/v1/embeddings) and the
// extractor (a chat completion answering with JSON).
package models

import (
	"context"
	"fmt"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Embedder turns texts into vectors of a fixed size.
type Embedder struct {
	api   *openai.Client
	conns *http.Transport
	model string
	dims  int
	retry retryPolicy
}

// NewEmbedder returns an embedder for model at baseURL (ending in /v1) whose
// vectors must have dims numbers. Each request is bounded by timeout and
// retried twice with backoff when the backend is down or answers 5xx.
func NewEmbedder(baseURL, apiKey, model string, dims int, timeout time.Duration) *Embedder {
	api, conns := newClient(baseURL, apiKey)
	return &Embedder{
		api:   api,
		conns: conns,
		model: model,
		dims:  dims,
		retry: retryPolicy{attempts: 3, backoff: 100 * time.Millisecond, timeout: timeout},
	}
}

// Model is the embedding model's name.
func (e *Embedder) Model() string { return e.model }

// Embed returns one vector per text, in order.
func (e *Embedder) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	var resp openai.EmbeddingResponse
	err := e.retry.do(ctx, "embeddings", func(ctx context.Context) error {
		var err error
		resp, err = e.api.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{
			Input:          texts,
			Model:          openai.EmbeddingModel(e.model),
			EncodingFormat: openai.EmbeddingEncodingFormatFloat,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings: %w: %d vectors for %d texts", ErrUnavailable, len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings: %w: bad index %d", ErrUnavailable, d.Index)
		}
		if len(d.Embedding) != e.dims {
			return nil, fmt.Errorf("embeddings: %w: model %q returned %d dimensions, the memory store holds %d (choose a %d-dimension model in ALICIA_EMBEDDING_MODEL)",
				ErrDimensions, e.model, len(d.Embedding), e.dims, e.dims)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// Close drops idle connections to the backend.
func (e *Embedder) Close() { e.conns.CloseIdleConnections() }

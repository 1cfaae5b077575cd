package upcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
)

// printModels says where the model backends are and whether they answer,
// so an unreachable one is seen at start, not at the first turn.
func printModels(ctx context.Context, w io.Writer, l llm.Config, m memory.Config) {
	type backend struct{ label, url, model, key, off string }
	backends := []backend{
		{"LLM:", l.LLMURL, l.Model, l.APIKey, ""},
		{"Embeddings:", m.EmbeddingURL, m.EmbeddingModel, m.EmbeddingAPIKey, "memory search and extraction are off (set ALICIA_EMBEDDING_URL)"},
	}
	lines := make([]string, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case b.url == "":
				lines[i] = fmt.Sprintf("  %-11s not configured: %s", b.label, b.off)
			default:
				state := "reachable"
				if err := probe(ctx, b.url, b.key); err != nil {
					state = "UNREACHABLE (" + err.Error() + ")"
				}
				lines[i] = fmt.Sprintf("  %-11s %s (%s) %s", b.label, b.url, b.model, state)
			}
		}()
	}
	wg.Wait()
	for _, line := range lines {
		fmt.Fprintln(w, line)
	}
}

// probe asks an OpenAI-compatible server for its models.
func probe(ctx context.Context, base, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/models", nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /models: %s", resp.Status)
	}
	return nil
}

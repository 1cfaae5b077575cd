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

// backend is a model server of the stack, as the banner shows it.
type backend struct {
	label, url, model, key string
	off                    string // why it matters that url is empty
	down                   string // what fails while it does not answer
	fixed                  string // a line with nothing to probe (a local engine)
}

// textBackends are the LLM and embeddings servers.
func textBackends(l llm.Config, m memory.Config) []backend {
	return []backend{
		{label: "LLM:", url: l.LLMURL, model: l.Model, key: l.APIKey},
		{label: "Embeddings:", url: m.EmbeddingURL, model: m.EmbeddingModel, key: m.EmbeddingAPIKey,
			off: "memory search and extraction are off (set ALICIA_EMBEDDING_URL)"},
	}
}

// printModels says where the model backends are and whether they answer,
// so an unreachable one is seen at start, not at the first turn.
func printModels(ctx context.Context, w io.Writer, backends []backend) {
	lines := make([]string, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case b.fixed != "":
				lines[i] = fmt.Sprintf("  %-11s %s", b.label, b.fixed)
			case b.url == "":
				lines[i] = fmt.Sprintf("  %-11s not configured: %s", b.label, b.off)
			default:
				state := "reachable"
				if err := probe(ctx, b.url, b.key); err != nil {
					state = "UNREACHABLE (" + err.Error() + ")"
					if b.down != "" {
						state += ": " + b.down
					}
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

// v1 is an OpenAI-compatible base URL ending in /v1.
func v1(u string) string {
	u = strings.TrimRight(u, "/")
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	return u
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

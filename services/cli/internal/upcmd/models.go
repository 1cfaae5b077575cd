package upcmd

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
)

// probeTimeout bounds each engine's probe at start.
const probeTimeout = 2 * time.Second

// backend is a model engine of the stack, as the banner shows it.
type backend struct {
	label  string
	engine engines.Engine
	off    string // why it matters that a server has no URL
	down   string // what fails while it is not usable
	hint   string // said after a usable local engine
}

// textBackends are the LLM and embeddings servers.
func textBackends(l llm.Config, m memory.Config) []backend {
	return []backend{
		{label: "LLM:", engine: engines.Engine{Kind: engines.OpenAI, URL: l.LLMURL, Model: l.Model, APIKey: l.APIKey}},
		{label: "Embeddings:", engine: engines.Engine{Kind: engines.OpenAI, URL: m.EmbeddingURL, Model: m.EmbeddingModel, APIKey: m.EmbeddingAPIKey},
			off: memoryOff + " (set ALICIA_EMBEDDING_URL)"},
	}
}

// printModels says what the model engines are and whether they can be used
// (the probe the gateway's server-info runs), so an unreachable one, or a
// server that does not serve the configured model, is seen at start, not
// at the first turn.
func printModels(ctx context.Context, w io.Writer, backends []backend) {
	lines := make([]string, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Go(func() { lines[i] = b.line(engines.Probe(ctx, nil, b.engine, probeTimeout)) })
	}
	wg.Wait()
	for _, line := range lines {
		fmt.Fprintln(w, line)
	}
}

// line is the banner line of b, probed as st.
func (b backend) line(st engines.Status) string {
	label := fmt.Sprintf("  %-11s ", b.label)
	what := st.Name
	if !b.engine.Local() {
		model := st.Model
		if st.Voice != "" {
			model += ", voice " + st.Voice
		}
		what = fmt.Sprintf("%s (%s)", st.URL, model)
	}
	down := ""
	if b.down != "" {
		down = ": " + b.down
	}
	switch {
	case !b.engine.Local() && b.engine.URL == "":
		return label + "not configured: " + b.off
	case st.Reachable:
		return label + what + " reachable" + b.hint
	case b.engine.Local():
		return label + what + " NOT AVAILABLE (" + st.Error + ")" + down
	case st.Answers: // the server answers, with other models
		return label + what + " NOT USABLE: " + st.Error + down
	default:
		return label + what + " UNREACHABLE (" + st.Error + ")" + down
	}
}

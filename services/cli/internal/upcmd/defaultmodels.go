package upcmd

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/tts"
)

// lookup is an engine the environment leaves unset that up looked for at
// its default URL: the speech server or the embedding model.
type lookup struct {
	env    string // the variable that chooses instead of the lookup
	looked bool
	url    string         // where up looked, as the variable would be set
	st     engines.Status // what the probe found there
}

// found: the server at the default URL serves the model, so up uses it.
func (l lookup) found() bool { return l.looked && l.st.Reachable }

// defaultModels is what up found at the default model URLs.
type defaultModels struct{ speech, embeddings lookup }

// findDefaultModels looks, at the same time, for a speech server at
// cfg.TTSProbeURL when src sets neither ALICIA_TTS_URL nor
// ALICIA_TTS_ENGINE, and for the embedding model at cfg.EmbeddingProbeURL
// when src does not set ALICIA_EMBEDDING_URL: the probe of pkg/engines (GET
// /models lists the model). It returns src with those variables set to
// what it found, for every service to read, so the tts, memory and the
// gateway's server-info agree. `alicia dev fake-models`, or a local
// speaches, is then used with nothing to export.
func findDefaultModels(ctx context.Context, cfg Config, src config.Source) (defaultModels, config.Source) {
	d := defaultModels{speech: lookup{env: "ALICIA_TTS_URL", url: cfg.TTSProbeURL},
		embeddings: lookup{env: "ALICIA_EMBEDDING_URL", url: cfg.EmbeddingProbeURL}}
	var wg sync.WaitGroup
	// A configuration that does not read is skipped here: up reports it
	// when it reads it for the service.
	if t, err := tts.ConfigFrom(src); err == nil && cfg.TTSProbeURL != "" && localSpeech(src) {
		d.speech.looked = true
		e := engines.Engine{Kind: engines.OpenAI, URL: engines.V1(cfg.TTSProbeURL), Model: t.Model, APIKey: t.APIKey,
			Voice: cmp.Or(t.Voice, tts.DefaultVoice(tts.EngineOpenAI))}
		wg.Go(func() { d.speech.st = engines.Probe(ctx, nil, e, probeTimeout) })
	}
	if m, err := memory.ConfigFrom(src); err == nil && cfg.EmbeddingProbeURL != "" && m.EmbeddingURL == "" {
		d.embeddings.looked = true
		e := engines.Engine{Kind: engines.OpenAI, URL: cfg.EmbeddingProbeURL, Model: m.EmbeddingModel, APIKey: m.EmbeddingAPIKey}
		wg.Go(func() { d.embeddings.st = engines.Probe(ctx, nil, e, probeTimeout) })
	}
	wg.Wait()
	found := map[string]string{}
	if d.speech.found() {
		found["ALICIA_TTS_ENGINE"], found["ALICIA_TTS_URL"] = tts.EngineOpenAI, d.speech.url
	}
	if d.embeddings.found() {
		found["ALICIA_EMBEDDING_URL"] = d.embeddings.url
	}
	if len(found) == 0 {
		return d, src
	}
	return d, src.Overlay("alicia up (found at the default URL)", found)
}

// What the banner says when an engine is off or local.
const (
	memoryOff  = "memory search and extraction are off"
	kokoroHint = "for Kokoro on an OpenAI-compatible server"
)

// explain adds to b's banner line why up chose its engine: found at the
// default URL, or not found there (espeak-ng speaks; memory is off).
func (l lookup) explain(b backend) backend {
	if !l.looked {
		return b
	}
	if l.st.Reachable {
		b.hint = fmt.Sprintf(" (found at the default URL; set %s to choose)", l.env)
		return b
	}
	missing := fmt.Sprintf("%s not found at the default URL %s: %s", l.st.Model, l.st.URL, l.st.Error)
	switch {
	case b.engine.Local():
		b.hint = fmt.Sprintf(" (local; %s; set %s %s)", missing, l.env, kokoroHint)
	case b.engine.URL == "":
		b.off = fmt.Sprintf("%s (%s; set %s)", memoryOff, missing, l.env)
	}
	return b
}

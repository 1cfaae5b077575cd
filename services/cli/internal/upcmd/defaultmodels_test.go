package upcmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/services/tts"
)

// modelServer is a fakeopenai on 127.0.0.1 that counts the requests it
// gets: a test can tell whether up looked there at all.
type modelServer struct {
	url  string // ending in /v1
	hits atomic.Int64
}

func newModelServer(t *testing.T, models ...string) *modelServer {
	s := &modelServer{}
	h := fakeopenai.NewHandler(fakeopenai.WithModels(models...), fakeopenai.WithoutRecording())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { h.Close(); srv.Close() })
	s.url = srv.URL + "/v1"
	return s
}

// TestUpFindsModelsAtTheDefaultURL: with ALICIA_TTS_URL, ALICIA_TTS_ENGINE
// and ALICIA_EMBEDDING_URL unset, up looks for the speech model at the
// tts's default URL and the embedding model at the llm's (injected here),
// as `alicia dev fake-models` serves them: found, the tts speaks with that
// server and memory search is on — in the tts, memory and the gateway's
// server-info configurations alike — and the banner says why; not found,
// espeak-ng speaks and memory search is off, and the banner says what was
// missing. A URL in the environment always wins, unprobed.
func TestUpFindsModelsAtTheDefaultURL(t *testing.T) {
	espeak := fakeEspeak(t)
	fake := newModelServer(t, engines.DefaultLLMModel, engines.DefaultASRModel, engines.DefaultTTSModel, engines.DefaultEmbeddingModel)
	chatOnly := newModelServer(t, "fake-chat")
	mine := newModelServer(t, "my-kokoro", "my-embedder")
	down := closedURL(t)
	// The tts's default URL has no /v1 (http://127.0.0.1:8000); the llm's has.
	at := func(base string) Config {
		return Config{TTSProbeURL: strings.TrimSuffix(base, "/v1"), EmbeddingProbeURL: base}
	}
	const found = " reachable (found at the default URL; set "
	for _, c := range []struct {
		name string
		cfg  Config
		env  map[string]string
		// The speech engine and its URL the tts and the gateway get, and
		// memory's embeddings URL (empty: search off).
		engine, ttsURL, embURL string
		tts, embeddings        string // the banner lines, after the label
		looked                 *modelServer
	}{
		{name: "fake-models at the default URL", cfg: at(fake.url),
			engine: tts.EngineOpenAI, ttsURL: strings.TrimSuffix(fake.url, "/v1"), embURL: fake.url,
			tts:        fake.url + " (kokoro, voice af_sarah)" + found + "ALICIA_TTS_URL to choose)",
			embeddings: fake.url + " (BAAI/bge-m3)" + found + "ALICIA_EMBEDDING_URL to choose)", looked: fake},
		{name: "nothing at the default URL", cfg: at(down), engine: tts.EngineEspeak,
			tts: "espeak-ng (voice en-us) reachable (local; kokoro not found at the default URL " + down +
				": dial: connect: connection refused; set ALICIA_TTS_URL for Kokoro on an OpenAI-compatible server)",
			embeddings: "not configured: memory search and extraction are off (BAAI/bge-m3 not found at the default URL " + down +
				": dial: connect: connection refused; set ALICIA_EMBEDDING_URL)"},
		{name: "a server without the models", cfg: at(chatOnly.url), engine: tts.EngineEspeak,
			tts: "espeak-ng (voice en-us) reachable (local; kokoro not found at the default URL " + chatOnly.url +
				": reachable, but model kokoro is not served (serves: fake-chat); set ALICIA_TTS_URL for Kokoro on an OpenAI-compatible server)",
			embeddings: "not configured: memory search and extraction are off (BAAI/bge-m3 not found at the default URL " + chatOnly.url +
				": reachable, but model BAAI/bge-m3 is not served (serves: fake-chat); set ALICIA_EMBEDDING_URL)", looked: chatOnly},
		{name: "the models chosen are looked for", cfg: at(mine.url),
			env:    map[string]string{"ALICIA_TTS_MODEL": "my-kokoro", "ALICIA_EMBEDDING_MODEL": "my-embedder"},
			engine: tts.EngineOpenAI, ttsURL: strings.TrimSuffix(mine.url, "/v1"), embURL: mine.url,
			tts:        mine.url + " (my-kokoro, voice af_sarah)" + found + "ALICIA_TTS_URL to choose)",
			embeddings: mine.url + " (my-embedder)" + found + "ALICIA_EMBEDDING_URL to choose)", looked: mine},
		{name: "URLs in the environment win", cfg: at(fake.url),
			env: map[string]string{"ALICIA_TTS_URL": strings.TrimSuffix(mine.url, "/v1"), "ALICIA_TTS_MODEL": "my-kokoro",
				"ALICIA_EMBEDDING_URL": mine.url, "ALICIA_EMBEDDING_MODEL": "my-embedder"},
			engine: tts.EngineOpenAI, ttsURL: strings.TrimSuffix(mine.url, "/v1"), embURL: mine.url,
			tts: mine.url + " (my-kokoro, voice af_sarah) reachable", embeddings: mine.url + " (my-embedder) reachable"},
		{name: "espeak-ng chosen", cfg: at(fake.url), env: map[string]string{"ALICIA_TTS_ENGINE": "espeak", "ALICIA_EMBEDDING_URL": mine.url,
			"ALICIA_EMBEDDING_MODEL": "my-embedder"}, engine: tts.EngineEspeak, embURL: mine.url,
			tts:        "espeak-ng (voice en-us) reachable (local; set ALICIA_TTS_URL for Kokoro on an OpenAI-compatible server)",
			embeddings: mine.url + " (my-embedder) reachable"},
		{name: "no lookup configured", engine: tts.EngineEspeak,
			tts:        "espeak-ng (voice en-us) reachable (local; set ALICIA_TTS_URL for Kokoro on an OpenAI-compatible server)",
			embeddings: "not configured: memory search and extraction are off (set ALICIA_EMBEDDING_URL)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := []*modelServer{fake, chatOnly, mine}
			before := make([]int64, len(servers))
			for i, s := range servers {
				before[i] = s.hits.Load()
			}
			stackEnv(t, espeak, c.env)
			sc, err := configure(context.Background(), c.cfg, newNATSUsers(), config.Environ())
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range servers {
				if n := s.hits.Load() - before[i]; (s == c.looked) != (n > 0) {
					t.Errorf("server %d got %d requests; want some only at the default URL up looked at", i, n)
				}
			}
			if s := sc.voice.tts; s.Engine != c.engine || (c.ttsURL != "" && s.URL != c.ttsURL) {
				t.Errorf("tts runs %s at %s, want %s at %s", s.Engine, s.URL, c.engine, c.ttsURL)
			}
			if g := sc.gateway.TTS; g.Kind != c.engine || (c.ttsURL != "" && g.URL != engines.V1(c.ttsURL)) {
				t.Errorf("server-info says tts %s at %s, want %s at %s", g.Kind, g.URL, c.engine, engines.V1(c.ttsURL))
			}
			if sc.memory.EmbeddingURL != c.embURL || sc.gateway.Embeddings.URL != c.embURL {
				t.Errorf("embeddings: memory %q, server-info %q; want %q", sc.memory.EmbeddingURL, sc.gateway.Embeddings.URL, c.embURL)
			}
			if sc.memory.LLMURL != engines.DefaultLLMURL || sc.llm.LLMURL != engines.DefaultLLMURL { // extraction asks the llm's model
				t.Errorf("memory extracts with %q, the llm answers with %q", sc.memory.LLMURL, sc.llm.LLMURL)
			}
			var out bytes.Buffer
			printModels(context.Background(), &out, sc.backends())
			for label, want := range map[string]string{"TTS:": c.tts, "Embeddings:": c.embeddings} {
				if l := line(out.String(), label); strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), label)) != want {
					t.Errorf("banner line %q\nwant %s %s", l, label, want)
				}
			}
		})
	}
}

// stackEnv is the environment up gives its services (a stack that is not
// started: nothing connects), with no model chosen but env.
func stackEnv(t *testing.T, espeak string, env map[string]string) {
	t.Helper()
	for k, v := range map[string]string{"ALICIA_NATS_URL": "nats://127.0.0.1:4222", "ALICIA_POSTGRES_URL": "postgres://x@127.0.0.1/db",
		"ALICIA_API_KEYS": "me:0123456789abcdef", "ALICIA_ESPEAK_PATH": espeak,
		"ALICIA_ASR_URL": closedURL(t), "ALICIA_LIVEKIT_URL": "ws://127.0.0.1:7880", "ALICIA_LIVEKIT_API_KEY": "APIup",
		"ALICIA_LIVEKIT_API_SECRET": strings.Repeat("s", 32)} {
		t.Setenv(k, v)
	}
	for _, k := range []string{"ALICIA_TTS_ENGINE", "ALICIA_TTS_URL", "ALICIA_TTS_MODEL", "ALICIA_TTS_VOICE", "ALICIA_TTS_API_KEY", "ALICIA_TTS_API_KEY_FILE",
		"ALICIA_EMBEDDING_URL", "ALICIA_EMBEDDING_MODEL", "ALICIA_EMBEDDING_API_KEY", "ALICIA_EMBEDDING_API_KEY_FILE",
		"ALICIA_LLM_URL", "ALICIA_LLM_MODEL"} {
		t.Setenv(k, env[k])
	}
}

// line returns the banner line that starts with label.
func line(out, label string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), label) {
			return l
		}
	}
	return ""
}

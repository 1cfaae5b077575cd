package upcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/tts"
)

// fakeEspeak is a stand-in espeak-ng that runs with the voice en-us only.
func fakeEspeak(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "espeak-ng")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n[ \"$3\" = en-us ]\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func closedURL(t *testing.T) string {
	return "http://" + testkit.FreeAddr(t) + "/v1" // nothing listens there
}

// TestBanner: each engine's line says what it is and whether it can be
// used; a server that answers but does not list the model is not usable
// (the LLM's server at the ASR's default URL).
func TestBanner(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithModels("fake-chat", "kokoro"))
	down := closedURL(t)
	espeak := fakeEspeak(t)
	l := llm.DefaultConfig()
	l.LLMURL, l.Model = srv.URL(), "fake-chat"
	m := memory.DefaultConfig()
	speech := func(engine, url, voice, path string) tts.Config {
		c := tts.DefaultConfig()
		c.Engine, c.URL, c.Voice, c.EspeakPath = engine, url, voice, path
		return c
	}
	for _, c := range []struct {
		name  string
		b     backend
		label string
		want  string // the whole line after the label
	}{
		{"llm listed", textBackends(l, m)[0], "LLM:", srv.URL() + " (fake-chat) reachable"},
		{"embeddings without URL", textBackends(l, m)[1], "Embeddings:", "not configured: memory search and extraction are off (set ALICIA_EMBEDDING_URL)"},
		{"asr not served", voiceServices{asr: asr.Config{URL: strings.TrimSuffix(srv.URL(), "/v1"), Model: "whisper-large-v3"}}.backends()[0], "ASR:",
			srv.URL() + " (whisper-large-v3) NOT USABLE: reachable, but model whisper-large-v3 is not served (serves: fake-chat, kokoro): spoken turns get ErrorMessage 503"},
		{"asr down", voiceServices{asr: asr.Config{URL: down, Model: "whisper-large-v3"}}.backends()[0], "ASR:",
			down + " (whisper-large-v3) UNREACHABLE (dial: connect: connection refused): spoken turns get ErrorMessage 503"},
		{"speech server", speechBackend(speech(tts.EngineOpenAI, strings.TrimSuffix(srv.URL(), "/v1"), "", espeak)), "TTS:",
			srv.URL() + " (kokoro, voice af_sarah) reachable"},
		{"espeak-ng", speechBackend(speech(tts.EngineEspeak, "", "", espeak)), "TTS:",
			"espeak-ng (voice en-us) reachable (local; set ALICIA_TTS_URL for Kokoro on an OpenAI-compatible server)"},
		{"espeak-ng without the voice", speechBackend(speech(tts.EngineEspeak, "", "xx", espeak)), "TTS:",
			"espeak-ng (voice xx) NOT AVAILABLE (espeak-ng with voice xx failed: exit status 1): install espeak-ng, or set ALICIA_TTS_URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			printModels(context.Background(), &out, []backend{c.b})
			label, rest, _ := strings.Cut(strings.TrimSpace(out.String()), " ")
			if label != c.label || strings.TrimSpace(rest) != c.want {
				t.Fatalf("line %q\nwant %s %s", out.String(), c.label, c.want)
			}
		})
	}
	t.Run("espeak-ng missing", func(t *testing.T) {
		var out bytes.Buffer
		printModels(context.Background(), &out, []backend{speechBackend(speech(tts.EngineEspeak, "", "", filepath.Join(t.TempDir(), "espeak-ng")))})
		if l := out.String(); !strings.Contains(l, "espeak-ng (voice en-us) NOT AVAILABLE (espeak-ng not found: ") || !strings.HasSuffix(l, "install espeak-ng, or set ALICIA_TTS_URL\n") {
			t.Fatalf("line %q", l)
		}
	})
	t.Run("asr at the default URL", func(t *testing.T) { // ALICIA_ASR_URL not set (voiceFrom)
		if d := (voiceServices{asr: asr.DefaultConfig(), asrDefaultURL: true}).backends()[0].down; !strings.HasSuffix(d, "(the default URL: set ALICIA_ASR_URL)") {
			t.Fatalf("down %q", d)
		}
	})
}

// TestGatewayNamesUpsSpeechEngine: with neither ALICIA_TTS_ENGINE nor
// ALICIA_TTS_URL set up speaks with espeak-ng, and the gateway it runs
// (which reads the source up chose in) says so; with a URL both use the
// server.
func TestGatewayNamesUpsSpeechEngine(t *testing.T) {
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "me:0123456789abcdef")
	for _, c := range []struct {
		name, url, engine, tts string
	}{
		{"no speech server", "", tts.EngineEspeak, "espeak-ng (voice en-us)"},
		{"speech server", "http://speaches:8000", tts.EngineOpenAI, "kokoro (voice af_sarah)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"ALICIA_TTS_ENGINE", "ALICIA_TTS_VOICE", "ALICIA_TTS_MODEL", "ALICIA_ESPEAK_PATH"} {
				t.Setenv(k, "")
			}
			t.Setenv("ALICIA_TTS_URL", c.url)
			src := chooseSpeechEngine(config.Environ())
			g, err := gateway.ConfigFrom(src)
			if err != nil {
				t.Fatal(err)
			}
			s, err := TTSConfigFrom(src)
			if err != nil {
				t.Fatal(err)
			}
			if s.Engine != c.engine || g.TTS.Kind != c.engine || g.TTS.Name() != c.tts {
				t.Fatalf("tts runs %q, gateway says %q (%s); want %q (%s)", s.Engine, g.TTS.Kind, g.TTS.Name(), c.engine, c.tts)
			}
		})
	}
}

// Package engines describes the model engines Alicia talks to (the LLM, the
// ASR and TTS backends, the embeddings): what each one is (an
// OpenAI-compatible server with a model, or the local espeak-ng with a
// voice), the defaults the services that use them and the gateway and
// `alicia up` that describe them share, and a probe that tells whether an
// engine is usable: the server answers and serves the configured model, or
// the binary runs with the configured voice.
package engines

import (
	"net/url"
	"strings"
)

// Kinds of engine.
const (
	OpenAI = "openai" // an OpenAI-compatible HTTP server
	Espeak = "espeak" // the local espeak-ng binary (speech only)
)

// Defaults, owned here so that a service and what describes it (the
// gateway's server-info, `alicia up`'s banner) cannot disagree.
const (
	DefaultLLMURL         = "http://127.0.0.1:8000/v1"
	DefaultLLMModel       = "Qwen/Qwen2.5-7B-Instruct-AWQ"
	DefaultASRURL         = "http://127.0.0.1:8000/v1"
	DefaultASRModel       = "whisper-large-v3"
	DefaultTTSURL         = "http://127.0.0.1:8000"
	DefaultTTSModel       = "kokoro"
	DefaultEspeakPath     = "espeak-ng"
	DefaultEmbeddingModel = "BAAI/bge-m3"
)

// DefaultVoice is the voice of a speech engine when ALICIA_TTS_VOICE is not set.
func DefaultVoice(kind string) string {
	if kind == Espeak {
		return "en-us"
	}
	return "af_sarah"
}

// Engine is one model engine as configured.
type Engine struct {
	Kind string // OpenAI or Espeak; empty means OpenAI
	// URL is the OpenAI-compatible base URL, ending in /v1 as it is called
	// (see V1); empty: not configured.
	URL    string
	Model  string
	APIKey string
	Voice  string // speech engines only
	Path   string // Espeak: the binary, looked up in PATH without a slash
}

// Local reports whether the engine is a program on this machine rather
// than a server.
func (e Engine) Local() bool { return e.Kind == Espeak }

// Name is what the engine is, as server-info and the banner show it:
// "espeak-ng (voice en-us)", "kokoro (voice af_sarah)", or the model.
func (e Engine) Name() string {
	switch {
	case e.Kind == Espeak:
		voice := e.Voice
		if voice == "" {
			voice = DefaultVoice(Espeak)
		}
		return "espeak-ng (voice " + voice + ")"
	case e.Voice != "":
		return e.Model + " (voice " + e.Voice + ")"
	default:
		return e.Model
	}
}

// V1 is base with its path ending in /v1, as the asr and tts services call
// their server: http://speaches:8000 and http://speaches:8000/v1 are the same.
func V1(base string) string {
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return base // Validate reports it
	}
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, "/v1") {
		p += "/v1"
	}
	u.Path, u.RawPath = p, ""
	return u.String()
}

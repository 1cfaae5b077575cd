package upcmd

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/tts"
)

// TTSConfigFrom is the tts configuration up runs: ALICIA_TTS_* of src as
// the tts command reads them, except that without ALICIA_TTS_ENGINE the
// engine follows ALICIA_TTS_URL: an OpenAI-compatible server (Kokoro behind
// speaches) when it is set, the local espeak-ng when it is not, so a
// machine without a speech server still hears the answers. (Up sets both
// when it finds a speech server at the default URL: findDefaultModels.)
func TTSConfigFrom(src config.Source) (tts.Config, error) {
	c, err := tts.ConfigFrom(src)
	if err != nil {
		return c, err
	}
	if localSpeech(src) {
		c.Engine = tts.EngineEspeak
	}
	return c, c.Validate()
}

// localSpeech: src sets neither ALICIA_TTS_ENGINE nor ALICIA_TTS_URL, so
// up speaks with espeak-ng.
func localSpeech(src config.Source) bool {
	return !src.IsSet("ALICIA_TTS_ENGINE") && !src.IsSet("ALICIA_TTS_URL")
}

// chooseSpeechEngine returns src with ALICIA_TTS_ENGINE=espeak when up
// speaks with espeak-ng, for every configuration to read: the gateway up
// runs reads that variable too, and its server-info must name the engine
// the tts runs.
func chooseSpeechEngine(src config.Source) config.Source {
	if !localSpeech(src) {
		return src
	}
	return src.Overlay("alicia up (no speech server)", map[string]string{"ALICIA_TTS_ENGINE": tts.EngineEspeak})
}

// service is one service up runs in its process.
type service struct {
	name string
	run  func(context.Context, zerolog.Logger) error
}

// roomAgent is the room-agent up runs (run), or why this build has none
// (missing).
type roomAgent struct {
	run     func(context.Context, zerolog.Logger) error
	missing string
	// vad says which VAD it listens with (roomagent.DescribeVAD).
	vad string
	// postgres sets the URL it reads conversations' hands-free mode with
	// (nil without a room-agent).
	postgres func(url string)
}

// voiceServices are the voice pipeline up runs beside the text services:
// asr, tts and, in a build with cgo, the room-agent.
type voiceServices struct {
	asr   asr.Config
	tts   tts.Config
	agent roomAgent
	// asrDefaultURL: ALICIA_ASR_URL is not set, the asr asks its default.
	asrDefaultURL bool
}

// voiceFrom reads their configuration from the stack's source
// (stackSource). Each logs in to NATS as its own user.
func voiceFrom(src config.Source, users natsUsers) (voiceServices, error) {
	v := voiceServices{asrDefaultURL: !src.IsSet("ALICIA_ASR_URL")}
	var aerr, terr, rerr error
	v.asr, aerr = asr.ConfigFrom(src)
	v.tts, terr = TTSConfigFrom(src)
	natsURL := v.asr.NATSURL
	v.agent, rerr = roomAgentFrom(src, func() (string, error) { return users.url(natsURL, natsauth.RoomAgent) })
	var uerr [2]error
	v.asr.NATSURL, uerr[0] = users.url(natsURL, natsauth.ASR)
	v.tts.NATSURL, uerr[1] = users.url(natsURL, natsauth.TTS)
	return v, errors.Join(aerr, terr, rerr, uerr[0], uerr[1])
}

func (v voiceServices) services() []service {
	s := []service{
		{"asr", func(ctx context.Context, log zerolog.Logger) error { return asr.Run(ctx, v.asr, log) }},
		{"tts", func(ctx context.Context, log zerolog.Logger) error { return tts.Run(ctx, v.tts, log) }},
	}
	if v.agent.run != nil {
		s = append(s, service{"room-agent", v.agent.run})
	}
	return s
}

// backends are the voice lines of the banner: the ASR server and the
// speech engine, described and probed as the gateway's server-info does.
func (v voiceServices) backends() []backend {
	a := backend{label: "ASR:", engine: engines.Engine{Kind: engines.OpenAI, URL: v.asr.BaseURL(), Model: v.asr.Model, APIKey: v.asr.APIKey},
		down: "spoken turns get ErrorMessage 503"}
	if v.asrDefaultURL {
		a.down += " (the default URL: set ALICIA_ASR_URL)"
	}
	return []backend{a, speechBackend(v.tts)}
}

// speechBackend is the tts's engine: espeak-ng, or an OpenAI-compatible server.
func speechBackend(t tts.Config) backend {
	voice := t.Voice
	if voice == "" {
		voice = tts.DefaultVoice(t.Engine)
	}
	if t.Engine == tts.EngineEspeak {
		return backend{label: "TTS:", engine: engines.Engine{Kind: engines.Espeak, Voice: voice, Path: t.EspeakPath},
			hint: " (local; set ALICIA_TTS_URL " + kokoroHint + ")",
			down: "install espeak-ng, or set ALICIA_TTS_URL"}
	}
	return backend{label: "TTS:", engine: engines.Engine{Kind: engines.OpenAI, URL: engines.V1(t.URL), Model: t.Model, APIKey: t.APIKey, Voice: voice},
		down: "voice answers get ErrorMessage 503"}
}

package upcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/tts"
)

// TTSConfigFromEnv is the tts configuration up runs: ALICIA_TTS_* as the
// tts command reads them, except that without ALICIA_TTS_ENGINE the engine
// follows ALICIA_TTS_URL: an OpenAI-compatible server (Kokoro behind
// speaches) when it is set, the local espeak-ng when it is not, so a
// machine without a speech server still hears the answers.
func TTSConfigFromEnv() (tts.Config, error) {
	c, err := tts.ConfigFromEnv()
	if err != nil {
		return c, err
	}
	if os.Getenv("ALICIA_TTS_ENGINE") == "" && os.Getenv("ALICIA_TTS_URL") == "" {
		c.Engine = tts.EngineEspeak
	}
	return c, c.Validate()
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
}

// voiceServices are the voice pipeline up runs beside the text services:
// asr, tts and, in a build with cgo, the room-agent.
type voiceServices struct {
	asr   asr.Config
	tts   tts.Config
	agent roomAgent
}

// voiceFromEnv reads their configuration once up has pointed the
// environment at its stack.
func voiceFromEnv() (voiceServices, error) {
	var v voiceServices
	var aerr, terr, rerr error
	v.asr, aerr = asr.ConfigFromEnv()
	v.tts, terr = TTSConfigFromEnv()
	v.agent, rerr = roomAgentFromEnv()
	return v, errors.Join(aerr, terr, rerr)
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

// backends are the voice lines of the banner: the ASR backend, and the
// speech engine (probed when it is a server).
func (v voiceServices) backends() []backend {
	a := backend{label: "ASR:", url: v.asr.BaseURL(), model: v.asr.Model, key: v.asr.APIKey,
		down: "spoken turns get ErrorMessage 503 until it answers"}
	if os.Getenv("ALICIA_ASR_URL") == "" {
		a.down += " (the default URL: set ALICIA_ASR_URL)"
	}
	t := v.tts
	voice := t.Voice
	if voice == "" {
		voice = tts.DefaultVoice(t.Engine)
	}
	if t.Engine != tts.EngineEspeak {
		return []backend{a, {label: "TTS:", url: v1(t.URL), model: t.Model + ", voice " + voice, key: t.APIKey,
			down: "voice answers get ErrorMessage 503 until it answers"}}
	}
	line := "espeak-ng (voice " + voice + ", local; set ALICIA_TTS_URL for Kokoro on an OpenAI-compatible server)"
	if _, err := exec.LookPath(t.EspeakPath); err != nil {
		line = fmt.Sprintf("espeak-ng NOT FOUND (%v): install espeak-ng, or set ALICIA_TTS_URL", err)
	}
	return []backend{a, {label: "TTS:", fixed: line}}
}

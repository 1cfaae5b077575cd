// Package roomagent is the room-agent service: Alicia's voice in LiveKit.
// It takes dispatch requests from a queue shared by all replicas, joins the
// conversation's room as alicia-agent, bridges the data channel to
// JetStream, listens to the user (VAD, end-pointing, ASR jobs), plays the
// answer's speech in turn order and stops when the user barges in. See
// README.md.
package roomagent

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/wake"
	"github.com/alicia-voice/alicia/services/room-agent/internal/agent"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// Config of the room-agent. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	LiveKitURL       string // ALICIA_LIVEKIT_URL (ws://…)
	LiveKitAPIKey    string // ALICIA_LIVEKIT_API_KEY or _FILE
	LiveKitAPISecret string // ALICIA_LIVEKIT_API_SECRET or _FILE

	// VAD decides what is speech (ALICIA_VAD): "neural", the Silero model
	// on ONNX Runtime (VADModel, ALICIA_VAD_MODEL; ONNXRuntimeLib,
	// ALICIA_ONNXRUNTIME_LIB; both found in the image's /usr/local/lib/alicia/vad
	// or the repository's deploy/vad/node_modules when unset); "energy", the
	// level over an adaptive noise floor; "auto" (the default), neural
	// where its runtime is present, energy otherwise (said at start).
	VAD            string
	VADModel       string
	ONNXRuntimeLib string
	// VADThreshold: a window is speech when the model's probability is at
	// least this (ALICIA_VAD_THRESHOLD, 0.5); it stays speech down to 0.15
	// less.
	VADThreshold float64
	// End-pointing: ALICIA_VAD_END_SILENCE, ALICIA_VAD_MIN_SPEECH,
	// ALICIA_VAD_MAX_UTTERANCE, ALICIA_VAD_PARTIAL_EVERY, ALICIA_VAD_MARGIN_DB.
	EndSilence   time.Duration
	MinSpeech    time.Duration
	MaxUtterance time.Duration
	PartialEvery time.Duration
	MarginDB     int
	// Adaptive end of turn, a heuristic (vad.EndOfTurn): the end silence is
	// EndSilenceMin after a partial transcript that ends a sentence or a
	// question, EndSilenceMax after one that trails off ("and", "um", a
	// comma), EndSilence otherwise (ALICIA_VAD_ADAPTIVE_END, on;
	// ALICIA_VAD_END_SILENCE_MIN, 300 ms; ALICIA_VAD_END_SILENCE_MAX, 1 s).
	AdaptiveEnd   bool
	EndSilenceMin time.Duration
	EndSilenceMax time.Duration
	// BargeInMin of user speech stops the agent (ALICIA_BARGE_IN_MIN).
	BargeInMin time.Duration
	// OnsetHangover: silences this short inside speech count as speech for
	// MinSpeech and BargeInMin (ALICIA_VAD_ONSET_HANGOVER, 60 ms; 0: none).
	OnsetHangover time.Duration
	// BargeInWordsWait: a barge-in pauses playout until the interrupting
	// utterance has words; with none this long after it ended, the answer
	// resumes (ALICIA_BARGE_IN_WORDS_WAIT, 3 s).
	BargeInWordsWait time.Duration
	// BargeInDuckDB: while a barge-in is decided the answer plays this much
	// lower (ALICIA_BARGE_IN_DUCK_DB, -20; -60 or below: paused instead).
	BargeInDuckDB float64
	// Backchannels ("mm-hmm", "yeah" said over an answer let it go on), by
	// language (ALICIA_BACKCHANNELS: "lang=phrase|phrase;…" replaces a
	// language's list; agent.DefaultBackchannels).
	Backchannels string
	// Speculation: transcribe the utterance when a silence begins, so the
	// transcript and a preemptive answer are ready when the silence ends the
	// turn (ALICIA_VOICE_SPECULATION, on by default), after PauseAfter of
	// silence (ALICIA_VAD_PAUSE_AFTER, 100 ms).
	Speculation bool
	PauseAfter  time.Duration
	// StoreAudio keeps utterance audio bytes in alicia_audio (ALICIA_STORE_INPUT_AUDIO).
	StoreAudio bool
	Language   string // ALICIA_ASR_LANGUAGE
	// WakeWords address Alicia in hands-free mode, comma-separated
	// (ALICIA_WAKE_WORDS, "alicia"): a conversation whose effective
	// Configuration.wakeWord is on answers only utterances that begin
	// with one (pkg/wake).
	WakeWords string
	// PostgresURL (ALICIA_POSTGRES_URL + _FILE, read-only; optional) is
	// where the conversations' and people's hands-free mode is read
	// (pkg/prefs); without it only the changes heard live on the bus apply.
	PostgresURL string

	MaxRooms     int           // ALICIA_AGENT_MAX_ROOMS
	Lease        time.Duration // ALICIA_AGENT_LEASE: a dead agent's room is dispatched again after this
	JoinTimeout  time.Duration // ALICIA_AGENT_JOIN_TIMEOUT
	EmptyTimeout time.Duration // ALICIA_AGENT_EMPTY_TIMEOUT: leave a room without users after this
	// MetricsAddr serves /metrics when set (ALICIA_ROOM_AGENT_METRICS_ADDR).
	svcmain.Metrics

	// OnVoiceToVoice, when set, is told each turn's voice-to-voice time (benchmarks).
	OnVoiceToVoice func(time.Duration)

	// Edge bounds the data channel's envelopes per participant and per
	// user (over the rooms of this agent) and the client meta, as the
	// gateway's WebSocket (ALICIA_EDGE_*, ALICIA_CLIENT_META_*; edge.Limits).
	Edge edge.Limits
	// Budgets bound a participant's data channel in bytes (ALICIA_BUDGET_*:
	// audio per second, text lengths, envelope size; edge.Budgets).
	Budgets edge.Budgets
	// BacklogLimit: the share of CONVERSATIONS' size the envelopes
	// persistence has not applied may take before data-channel input is
	// refused (ALICIA_STREAM_BACKLOG_LIMIT, default 0.5; pkg/backlog).
	BacklogLimit float64
}

// ALICIA_VAD values.
const (
	VADAuto   = "auto"
	VADNeural = "neural"
	VADEnergy = "energy"
)

// metricsAddrVar names the room-agent's metrics address.
const metricsAddrVar = "ALICIA_ROOM_AGENT_METRICS_ADDR"

// maxUtteranceCap is the longest ALICIA_VAD_MAX_UTTERANCE: an utterance's
// input audio (16 kHz 16-bit PCM, 32 kB/s) is stored in one AudioChunk
// envelope of at most 1 MiB.
const maxUtteranceCap = 30 * time.Second

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Bus: svcmain.DefaultBus(), VAD: VADAuto, VADThreshold: 0.5, EndSilence: 500 * time.Millisecond, MinSpeech: 150 * time.Millisecond,
		MaxUtterance: 25 * time.Second, PartialEvery: 500 * time.Millisecond, MarginDB: 12, BargeInMin: 200 * time.Millisecond,
		OnsetHangover: 60 * time.Millisecond, BargeInWordsWait: 3 * time.Second, BargeInDuckDB: -20,
		AdaptiveEnd: true, EndSilenceMin: 300 * time.Millisecond, EndSilenceMax: time.Second,
		Speculation: true, PauseAfter: 100 * time.Millisecond, WakeWords: strings.Join(wake.DefaultWords, ","),
		MaxRooms: 50, Lease: 10 * time.Second, JoinTimeout: 10 * time.Second, EmptyTimeout: 30 * time.Second,
		Edge: edge.DefaultLimits(), Budgets: edge.DefaultBudgets(), BacklogLimit: backlog.DefaultLimit,
	}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the room-agent command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_LIVEKIT_URL", &c.LiveKitURL)
	src.String("ALICIA_ASR_LANGUAGE", &c.Language)
	src.String("ALICIA_VAD", &c.VAD)
	src.String("ALICIA_BACKCHANNELS", &c.Backchannels)
	src.String("ALICIA_VAD_MODEL", &c.VADModel)
	src.String("ALICIA_ONNXRUNTIME_LIB", &c.ONNXRuntimeLib)
	src.String(wake.EnvWords, &c.WakeWords)
	c.Metrics.From(src, metricsAddrVar)
	errs := []error{
		c.Bus.From(src),
		src.Secret("ALICIA_LIVEKIT_API_KEY", &c.LiveKitAPIKey),
		src.Secret("ALICIA_LIVEKIT_API_SECRET", &c.LiveKitAPISecret),
		src.Secret("ALICIA_POSTGRES_URL", &c.PostgresURL),
		src.Float64("ALICIA_VAD_THRESHOLD", &c.VADThreshold),
		src.Duration("ALICIA_VAD_END_SILENCE", &c.EndSilence),
		src.Duration("ALICIA_VAD_MIN_SPEECH", &c.MinSpeech),
		src.Duration("ALICIA_VAD_MAX_UTTERANCE", &c.MaxUtterance),
		src.Duration("ALICIA_VAD_PARTIAL_EVERY", &c.PartialEvery),
		src.Int("ALICIA_VAD_MARGIN_DB", &c.MarginDB),
		src.Bool("ALICIA_VAD_ADAPTIVE_END", &c.AdaptiveEnd),
		src.Duration("ALICIA_VAD_END_SILENCE_MIN", &c.EndSilenceMin),
		src.Duration("ALICIA_VAD_END_SILENCE_MAX", &c.EndSilenceMax),
		src.Duration("ALICIA_BARGE_IN_MIN", &c.BargeInMin),
		src.Duration("ALICIA_VAD_ONSET_HANGOVER", &c.OnsetHangover),
		src.Duration("ALICIA_BARGE_IN_WORDS_WAIT", &c.BargeInWordsWait),
		src.Float64("ALICIA_BARGE_IN_DUCK_DB", &c.BargeInDuckDB),
		src.Bool("ALICIA_VOICE_SPECULATION", &c.Speculation),
		src.Duration("ALICIA_VAD_PAUSE_AFTER", &c.PauseAfter),
		src.Bool("ALICIA_STORE_INPUT_AUDIO", &c.StoreAudio),
		src.Int("ALICIA_AGENT_MAX_ROOMS", &c.MaxRooms),
		src.Duration("ALICIA_AGENT_LEASE", &c.Lease),
		src.Duration("ALICIA_AGENT_JOIN_TIMEOUT", &c.JoinTimeout),
		src.Duration("ALICIA_AGENT_EMPTY_TIMEOUT", &c.EmptyTimeout),
		c.Edge.From(src),
		c.Budgets.From(src),
	}
	if src.IsSet(backlog.EnvLimit) {
		var err error
		c.BacklogLimit, err = backlog.LimitFrom(src)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	errs := []error{c.Bus.Validate(), c.Metrics.Validate(metricsAddrVar)}
	if c.MaxRooms < 1 {
		errs = append(errs, errors.New("ALICIA_AGENT_MAX_ROOMS must be at least 1"))
	}
	switch c.VAD {
	case VADAuto, VADNeural, VADEnergy:
	default:
		errs = append(errs, fmt.Errorf("ALICIA_VAD %q: auto, neural or energy", c.VAD))
	}
	if c.BargeInDuckDB >= 0 {
		errs = append(errs, fmt.Errorf("ALICIA_BARGE_IN_DUCK_DB %v: negative dB (-60 or below: pause)", c.BargeInDuckDB))
	}
	if _, err := agent.ParseBackchannels(c.Backchannels); err != nil {
		errs = append(errs, err)
	}
	if c.VADThreshold <= 0.15 || c.VADThreshold >= 1 {
		errs = append(errs, fmt.Errorf("ALICIA_VAD_THRESHOLD %v: between 0.15 and 1", c.VADThreshold))
	}
	if c.MaxUtterance > maxUtteranceCap {
		errs = append(errs, fmt.Errorf("ALICIA_VAD_MAX_UTTERANCE %s: at most %s (an utterance's audio is one envelope of at most 1 MiB)", c.MaxUtterance, maxUtteranceCap))
	}
	if err := c.Edge.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Budgets.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := (backlog.Config{Limit: c.BacklogLimit}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.BargeInMin < 0 {
		errs = append(errs, errors.New("ALICIA_BARGE_IN_MIN must not be negative"))
	}
	if c.OnsetHangover < 0 || c.OnsetHangover > 200*time.Millisecond {
		errs = append(errs, errors.New("ALICIA_VAD_ONSET_HANGOVER must be 0-200ms"))
	}
	if c.BargeInWordsWait < 0 {
		errs = append(errs, errors.New("ALICIA_BARGE_IN_WORDS_WAIT must not be negative"))
	}
	if c.AdaptiveEnd && (c.EndSilenceMin <= 0 || c.EndSilenceMax <= 0) {
		errs = append(errs, errors.New("ALICIA_VAD_END_SILENCE_MIN and ALICIA_VAD_END_SILENCE_MAX must be positive"))
	}
	if err := c.agent().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c Config) agent() agent.Config {
	hangover := c.OnsetHangover
	if hangover == 0 {
		hangover = -1 // none (vad takes 0 for its default)
	}
	return agent.Config{
		LiveKitURL: c.LiveKitURL, APIKey: c.LiveKitAPIKey, APISecret: c.LiveKitAPISecret,
		VAD: vad.Config{EndSilence: c.EndSilence, MinSpeech: c.MinSpeech, MaxUtterance: c.MaxUtterance,
			PartialEvery: c.PartialEvery, MarginDB: float64(c.MarginDB), PauseAfter: c.PauseAfter, Threshold: c.VADThreshold,
			OnsetHangover: hangover},
		EndOfTurn:     vad.EndOfTurn{Off: !c.AdaptiveEnd, Min: c.EndSilenceMin, Max: c.EndSilenceMax},
		NoSpeculation: !c.Speculation,
		BargeInMin:    c.BargeInMin, StoreAudio: c.StoreAudio, Language: c.Language, WakeWords: wake.ParseWords(c.WakeWords),
		MaxRooms: c.MaxRooms, Lease: c.Lease, JoinTimeout: c.JoinTimeout, EmptyTimeout: c.EmptyTimeout,
		OnVoiceToVoice: c.OnVoiceToVoice, Edge: c.Edge, Budgets: c.Budgets,
		BargeInWordsWait: c.BargeInWordsWait, DuckDB: c.BargeInDuckDB, Backchannels: backchannels(c.Backchannels),
	}
}

// backchannels are the lists ALICIA_BACKCHANNELS makes (Validate checked it).
func backchannels(s string) agent.Backchannels {
	b, err := agent.ParseBackchannels(s)
	if err != nil {
		return agent.DefaultBackchannels()
	}
	return b
}

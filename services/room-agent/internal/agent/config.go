// Package agent is the room-agent: it takes dispatch requests, joins a
// conversation's LiveKit room as alicia-agent, bridges the data channel to
// JetStream through pkg/edge, turns the user's speech into ASR jobs (VAD
// and end-pointing), plays TTS audio on its own track in turn order, and
// stops at once when the user barges in.
package agent

import (
	"context"
	"errors"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// Identity is the agent's participant identity in every room.
const Identity = "alicia-agent"

// Config of the agent.
type Config struct {
	LiveKitURL string
	APIKey     string
	APISecret  string

	VAD vad.Config
	// EndOfTurn adapts the VAD's end silence to each transcript of the
	// open utterance (endofturn.go; Off: the fixed VAD.EndSilence).
	EndOfTurn vad.EndOfTurn
	// BargeInMin of user speech while the agent answers stops the answer.
	BargeInMin time.Duration
	// BargeInWordsWait: a barge-in pauses playout until the interrupting
	// utterance has words (a transcript); when it has none this long after
	// it ended, playout resumes: a false interruption (default 3 s).
	BargeInWordsWait time.Duration
	// DuckDB: while a barge-in is decided the answer plays this much lower
	// (negative dB; default -20); at -60 or below it pauses instead (and a
	// false interruption replays the sentence it cut from its start).
	DuckDB float64
	// Backchannels: words that, said alone over an answer, let it go on
	// (nil: DefaultBackchannels).
	Backchannels Backchannels
	// StoreAudio keeps the user's utterances' PCM in alicia_audio.
	StoreAudio bool
	// Language hint for ASR ("" lets the model detect it).
	Language string
	// WakeWords address Alicia in hands-free mode (ALICIA_WAKE_WORDS);
	// HandsFree tells whether a conversation is in that mode now (its
	// effective Configuration.wakeWord; nil: never). handsfree.go.
	WakeWords []string
	HandsFree func(ctx context.Context, conversationID string) (bool, error)
	// NoSpeculation turns off speculative transcription at the start of a
	// silence, and with it preemptive answers (speculate.go).
	NoSpeculation bool

	// MaxRooms one agent joins at once.
	MaxRooms int
	// Lease: a dispatch whose agent stops heartbeating for this long goes to another agent.
	Lease time.Duration
	// JoinTimeout bounds joining a room (accept + timeout).
	JoinTimeout time.Duration
	// EmptyTimeout: the agent leaves a room without users after this long.
	EmptyTimeout time.Duration
	// OnVoiceToVoice, when set, is told each turn's voice-to-voice time
	// (benchmarks; the histogram has it too).
	OnVoiceToVoice func(time.Duration)
	// Edge bounds each participant's data channel (zero fields: edge defaults).
	Edge edge.Limits
	// Budgets bound what a participant sends on the data channel in bytes
	// (audio per second, text lengths, envelope size: edge.Budgets; zero
	// fields: defaults). The stored and daily budgets are the gateway's,
	// which reads them from Postgres.
	Budgets edge.Budgets
}

// WithDefaults fills zero values.
func (c Config) WithDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.BargeInMin, 200*time.Millisecond)
	def(&c.BargeInWordsWait, 3*time.Second)
	if c.DuckDB == 0 {
		c.DuckDB = -20
	}
	if c.Backchannels == nil {
		c.Backchannels = DefaultBackchannels()
	}
	def(&c.Lease, 10*time.Second)
	def(&c.JoinTimeout, 10*time.Second)
	def(&c.EmptyTimeout, 30*time.Second)
	if c.MaxRooms == 0 {
		c.MaxRooms = 50
	}
	return c
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.LiveKitURL == "" {
		errs = append(errs, errors.New("LiveKit URL is required"))
	}
	if c.APIKey == "" || c.APISecret == "" {
		errs = append(errs, errors.New("LiveKit API key and secret are required"))
	}
	if err := c.VAD.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.EndOfTurn.Validate(c.VAD); err != nil {
		errs = append(errs, err)
	}
	if c.DuckDB > 0 {
		errs = append(errs, errors.New("the barge-in duck level must be negative dB"))
	}
	if err := c.Backchannels.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Lease > 0 && c.Lease < time.Second {
		errs = append(errs, errors.New("dispatch lease must be at least 1s"))
	}
	return errors.Join(errs...)
}

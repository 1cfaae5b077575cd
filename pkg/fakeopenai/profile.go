package fakeopenai

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Profile is how long the fake's models take, per endpoint, so tests and
// benchmarks can feel a GPU box instead of instant answers. The zero
// Profile is instant: nothing waits (what every test gets unless it asks).
// A profile adds to faults (Fault.Latency, ChunkDelay, a transcript's
// Latency, SpeechConfig.FirstByte); it is read once when a request arrives,
// and its waits end at once when the request or the handler does.
// See README.md for the gpu-box figures and where they come from.
type Profile struct {
	// Name is for display (alicia dev fake-models' banner); it changes no
	// timing.
	Name          string
	Transcription TranscriptionTiming
	Chat          ChatTiming
	Speech        SpeechTiming
	Embeddings    EmbeddingsTiming
}

// TranscriptionTiming: a transcription answers Fixed + PerAudioSecond for
// every second of uploaded audio after the upload is read.
type TranscriptionTiming struct {
	Fixed          time.Duration
	PerAudioSecond time.Duration
}

// ChatTiming: the first token of an answer comes TimeToFirstToken after
// the request, the following ones at TokensPerSecond (0: all at once). A
// streamed delta is sent when its last token is generated (EstimateTokens
// counts them); a non-streamed answer waits for the whole generation.
type ChatTiming struct {
	TimeToFirstToken time.Duration
	TokensPerSecond  float64
}

// SpeechTiming: the first audio bytes come TimeToFirstAudio after the
// request; the rest of the body follows at RealTimeFactor, the synthesis
// time per second of audio (1/35 for "35× real time"). A request with
// "stream": false waits for the whole synthesis before its first byte.
type SpeechTiming struct {
	TimeToFirstAudio time.Duration
	RealTimeFactor   float64
}

// EmbeddingsTiming: an embeddings request answers Fixed + PerInput for
// every input text.
type EmbeddingsTiming struct {
	Fixed    time.Duration
	PerInput time.Duration
}

// Instant is the zero profile under its name: no model time at all.
var Instant = Profile{Name: "instant"}

// GPUBox is one data-centre GPU serving faster-whisper large-v3 (beam 5,
// fp16), Qwen2.5-7B-Instruct-AWQ through vLLM, Kokoro-82M and a bge-m3
// class embedding model (1024 dimensions). The figures, their sources and
// how they became these numbers are in README.md.
var GPUBox = Profile{
	Name: "gpu-box",
	// faster-whisper README: large-v2 (large-v3's architecture), fp16, beam
	// 5, 13 min of audio in 54 s on a Tesla V100S: 54/780 = 69 ms per second.
	Transcription: TranscriptionTiming{Fixed: 100 * time.Millisecond, PerAudioSecond: 69 * time.Millisecond},
	// Qwen2.5 speed benchmark (vLLM 0.6.3, A100 80GB, batch 1): 7B AWQ
	// 148.10 tokens/s at input length 1, 137.64 at 6144.
	Chat: ChatTiming{TimeToFirstToken: 150 * time.Millisecond, TokensPerSecond: 140},
	// Kokoro-FastAPI README: first token ~300 ms (GPU); 35×–100× real time.
	Speech:     SpeechTiming{TimeToFirstAudio: 300 * time.Millisecond, RealTimeFactor: 1.0 / 35},
	Embeddings: EmbeddingsTiming{Fixed: 20 * time.Millisecond, PerInput: 5 * time.Millisecond},
}

// profiles are the named profiles, by name.
var profiles = map[string]Profile{Instant.Name: Instant, GPUBox.Name: GPUBox}

// ProfileNames lists the named profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ProfileByName returns a named profile; an unknown name is an error that
// lists the known ones.
func ProfileByName(name string) (Profile, error) {
	if p, ok := profiles[name]; ok {
		return p, nil
	}
	return Profile{}, fmt.Errorf("unknown model timing profile %q (known: %s)", name, strings.Join(ProfileNames(), ", "))
}

// IsInstant reports whether p makes nothing wait.
func (p Profile) IsInstant() bool {
	p.Name = ""
	return p == Profile{}
}

// WithProfile sets the timing profile a handler starts with.
func WithProfile(p Profile) Option { return func(h *Handler) { h.profile = p } }

// SetProfile changes the timing profile for requests arriving from now on;
// SetProfile(Profile{}) makes the models instant again. Reset keeps it.
func (h *Handler) SetProfile(p Profile) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.profile = p
}

// Profile is the current timing profile.
func (h *Handler) Profile() Profile {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.profile
}

// TranscriptionTime is how long transcribing audio takes.
func (p Profile) TranscriptionTime(audio time.Duration) time.Duration {
	t := p.Transcription
	return t.Fixed + scale(t.PerAudioSecond, audio.Seconds())
}

// TokenInterval is the time between two generated tokens (0: none).
func (p Profile) TokenInterval() time.Duration {
	if p.Chat.TokensPerSecond <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(time.Second) / p.Chat.TokensPerSecond))
}

// TokenAt is when token i (from 0) of an answer is generated, from the
// request: the first at the time to first token, then one per interval.
func (p Profile) TokenAt(i int) time.Duration {
	return p.Chat.TimeToFirstToken + time.Duration(max(i, 0))*p.TokenInterval()
}

// ChatTime is how long generating an answer of n tokens takes: when its
// last token is out (the time to first token for an empty answer).
func (p Profile) ChatTime(tokens int) time.Duration { return p.TokenAt(tokens - 1) }

// SpeechAudioAt is when the body's audio from offset on (the audio sent
// before it) is ready: the first bytes at the time to first audio, the
// rest as fast as the real-time factor synthesises it.
func (p Profile) SpeechAudioAt(offset time.Duration) time.Duration {
	return p.Speech.TimeToFirstAudio + scale(offset, p.Speech.RealTimeFactor)
}

// SpeechTime is how long synthesising audio takes in full: what a
// non-streamed speech request waits before its first byte.
func (p Profile) SpeechTime(audio time.Duration) time.Duration { return p.SpeechAudioAt(audio) }

// EmbeddingsTime is how long embedding n inputs takes.
func (p Profile) EmbeddingsTime(inputs int) time.Duration {
	return p.Embeddings.Fixed + time.Duration(max(inputs, 0))*p.Embeddings.PerInput
}

// EstimateTokens is the fake's tokeniser: about four characters a token
// (OpenAI's and Qwen's rule of thumb for English), at least one for any
// text, none for the empty string.
func EstimateTokens(s string) int {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return 0
	}
	return max(1, (n+2)/4)
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}

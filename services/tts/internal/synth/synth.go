// Package synth holds the speech synthesis backends: an OpenAI-compatible
// /v1/audio/speech client (Kokoro behind speaches in production) and a local
// espeak-ng. Both stream mono 16-bit little-endian PCM at 24 kHz (Rate) to a
// callback as the audio is produced, so the first chunk can be played
// before the sentence is synthesised.
package synth

import "github.com/alicia-voice/alicia/pkg/audio"

// Rate is the sample rate every backend delivers.
const Rate = 24000

// Format is the audio format name of what the backends deliver.
var Format = audio.PCMFormat(Rate)

// Emit receives PCM bytes as they are produced; an error stops synthesis.
// The slice is only valid during the call. Byte counts need not be even:
// a sample may be split across two calls.
type Emit func(pcm []byte) error

// Voice is how one request speaks, the conversation's preferences (pkg/prefs);
// a zero field is the backend's own (its configured voice, speed 1).
type Voice struct {
	Name     string  // the engine's voice name
	Speed    float64 // speaking rate, 1 being the voice's own
	Language string  // BCP 47; an engine whose voices are languages (espeak-ng) uses it when Name is empty
}

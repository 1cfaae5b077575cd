// Package noisy makes the audio the voice-activity tests and benchmarks
// hear: a person's room rather than a silent one. Everything is 16 kHz mono
// signed 16-bit PCM (Rate), built at test time from sox and espeak-ng (task
// deps installs both) and Go code seeded with fixed seeds, so the same call
// gives the same samples on every run. Generated audio is cached under
// os.UserCacheDir()/alicia/noisy, keyed by the parameters and the tools'
// versions; README.md gives the exact commands.
//
// The pieces:
//
//   - Noise(t, kind, d): d of one kind of room noise at Level dBFS.
//   - Speech(t, text, voice): espeak-ng speaking text, silence trimmed;
//     Utterances and Backchannels are the texts the tests speak.
//   - MixSNR, Overlay, Gain, AtLevel: combining signals.
//   - EchoPath / Echo: the assistant's own audio as it comes back through
//     the person's microphone.
//   - Timeline: utterances placed on a timeline with the truth (where speech
//     starts and ends, in samples).
//
// Under CI=true a missing sox or espeak-ng fails the test (testkit.Missing);
// elsewhere the test is skipped.
package noisy

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// Rate is the sample rate of everything this package makes (Hz).
const Rate = 16000

// Level is the RMS level of what Noise returns (dBFS, over its whole
// length). Scale with AtLevel or Gain, or mix with MixSNR.
const Level = -30.0

// Kind is a kind of room noise.
type Kind string

// The kinds of noise. README.md says how each is made.
const (
	White    Kind = "white"    // sox whitenoise: flat spectrum, stationary
	Pink     Kind = "pink"     // sox pinknoise: -3 dB/octave, stationary
	Brown    Kind = "brown"    // sox brownnoise: -6 dB/octave, a rumble, stationary
	Fan      Kind = "fan"      // a hum at 50/100/150 Hz over low-passed brown noise, stationary
	Bursts   Kind = "bursts"   // pink-noise bursts of 50–400 ms with gaps: a door, a rustle, a cough-like thing
	Babble   Kind = "babble"   // four espeak-ng talkers mixed: speech-like, see SpeechLike
	Keyboard Kind = "keyboard" // 10–20 ms broadband clicks at a typing rhythm
	Music    Kind = "music"    // plucked chords with a kick drum on the beat
)

// Kinds lists every kind, in a fixed order.
func Kinds() []Kind {
	return []Kind{White, Pink, Brown, Fan, Bursts, Babble, Keyboard, Music}
}

// SpeechLike reports whether the noise is made of speech (babble): a VAD
// that calls it speech is not wrong about the signal, only about who
// speaks, so tests count it apart from the other kinds.
func (k Kind) SpeechLike() bool { return k == Babble }

// Stationary reports whether the noise's level and spectrum stay the same
// over time (white, pink, brown, fan).
func (k Kind) Stationary() bool {
	switch k {
	case White, Pink, Brown, Fan:
		return true
	}
	return false
}

// Noise returns d of the kind of noise at Level dBFS. The same kind and
// duration give the same samples (a longer d is not an extension of a
// shorter one). The test fails on an unknown kind, and is skipped (fails
// under CI=true) when a tool it needs is missing.
func Noise(t testing.TB, kind Kind, d time.Duration) []int16 {
	t.Helper()
	n := Samples(d)
	if n <= 0 {
		return nil
	}
	var gen func(n int, tools toolset) ([]int16, error)
	need := []string{"sox"}
	switch kind {
	case White, Pink, Brown:
		gen = func(n int, ts toolset) ([]int16, error) {
			return ts.sox(Rate, 1, "synth", samplesArg(n), string(kind)+"noise")
		}
	case Fan:
		gen = fan
	case Bursts:
		gen = bursts
	case Keyboard:
		gen = keyboard
	case Music:
		gen = music
	case Babble:
		gen, need = babble, []string{"espeak-ng"}
	default:
		t.Fatalf("noisy: unknown noise kind %q (one of %v)", kind, Kinds())
		return nil
	}
	tools, ok := requireTools(t, need...)
	if !ok {
		return nil
	}
	pcm, err := cached(tools, fmt.Sprintf("noise|%s|%d", kind, n), func() ([]int16, error) {
		pcm, err := gen(n, tools)
		if err != nil {
			return nil, err
		}
		return AtLevel(pcm, Level), nil
	})
	if err != nil {
		t.Fatalf("noisy: making %v of %s noise: %v", d, kind, err)
		return nil
	}
	return pcm
}

// Samples is the number of samples d lasts at Rate.
func Samples(d time.Duration) int {
	return int(d * Rate / time.Second)
}

// Duration is how long n samples last at Rate.
func Duration(n int) time.Duration { return audio.FramesDuration(n, Rate) }

// Gain returns pcm amplified by dB (negative to attenuate), saturating at
// full scale.
func Gain(pcm []int16, dB float64) []int16 {
	g := math.Pow(10, dB/20)
	out := make([]int16, len(pcm))
	for i, v := range pcm {
		out[i] = clip(float64(v) * g)
	}
	return out
}

// AtLevel returns pcm scaled so its RMS over its whole length is dBFS
// (silence stays silence).
func AtLevel(pcm []int16, dBFS float64) []int16 {
	if audio.RMS(pcm) == 0 {
		return append([]int16(nil), pcm...)
	}
	return Gain(pcm, dBFS-audio.DBFS(pcm))
}

// clip rounds v to the nearest sample value, saturating at full scale.
func clip(v float64) int16 {
	v = math.Round(v)
	if v > math.MaxInt16 {
		return math.MaxInt16
	}
	if v < math.MinInt16 {
		return math.MinInt16
	}
	return int16(v)
}

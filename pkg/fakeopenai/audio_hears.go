package fakeopenai

import (
	"math"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// A real Whisper hears an assistant's answer come back through a
// microphone (speakers without echo cancellation) as the answer's words.
// HearsItsOwnSpeech makes the fake do the same with the voice-like audio
// its /v1/audio/speech made (synth): it knows the latest texts it spoke,
// and a transcription request whose level envelope follows one of them
// (10 ms blocks, normalised correlation at the best offset) is answered
// with the words of the part it follows. Audio it did not speak goes to
// next (the default transcriber when nil).

// spokenText is a text /v1/audio/speech spoke and how long it took.
type spokenText struct {
	input    string
	duration time.Duration
}

// maxSpoken: the latest texts HearsItsOwnSpeech knows.
const maxSpoken = 32

// Matching tuning.
const (
	hearBlock = 10 * time.Millisecond
	// hearMinBlocks: the sound a match needs (blocks above hearFloorDB):
	// the VAD's minimum speech is 150 ms.
	hearMinBlocks = 10
	hearFloorDB   = -60.0
	// hearCorr: the envelope correlation that makes audio the fake's own
	// (an echo chopped by a canceller's muting still finds 0.65; another
	// voice, espeak-ng's, about 0.4).
	hearCorr = 0.6
)

func (h *Handler) spoke(s spokenText) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio.spoken = append(h.audio.spoken, s)
	if over := len(h.audio.spoken) - maxSpoken; over > 0 {
		h.audio.spoken = h.audio.spoken[over:]
	}
}

// HearsItsOwnSpeech returns a transcriber that hears the handler's own
// speech as its words, and passes other audio to next.
func (h *Handler) HearsItsOwnSpeech(next Transcriber) Transcriber {
	if next == nil {
		next = defaultTranscriber
	}
	return func(r TranscriptionRequest) Transcript {
		h.mu.Lock()
		spoken := append([]spokenText(nil), h.audio.spoken...)
		h.mu.Unlock()
		if text, ok := heardIn(r.Samples, r.SampleRate, spoken); ok {
			return Transcript{Text: text}
		}
		return next(r)
	}
}

// heardIn finds which of spoken the samples (at rate) are part of, and
// the words of that part.
func heardIn(samples []int16, rate int, spoken []spokenText) (string, bool) {
	if rate <= 0 {
		return "", false
	}
	n := rate * int(hearBlock) / int(time.Second)
	var env []float64
	for i := 0; i+n <= len(samples); i += n {
		env = append(env, audio.DBFS(samples[i:i+n]))
	}
	best, bestText := hearCorr, ""
	for i := len(spoken) - 1; i >= 0; i-- {
		s := spoken[i]
		ref := synthEnvelope(s)
		if lag, c, from, to := bestOffset(env, ref); c >= best {
			if text := wordsAt(s, lag+from, lag+to); text != "" {
				best, bestText = c, text
			}
		}
	}
	return bestText, bestText != ""
}

// synthEnvelope is the level (dBFS) of s's synthesised speech per block,
// from the synth's own envelope.
func synthEnvelope(s spokenText) []float64 {
	const rate = 16000
	total := int(s.duration * rate / time.Second)
	syn := newSynth(s.input, total, rate)
	n := rate * int(hearBlock) / int(time.Second)
	var out []float64
	for b := 0; b+n <= total; b += n {
		var sum float64
		for j := b; j < b+n; j++ {
			e := syn.envelope(j)
			sum += e * e
		}
		// The harmonic series' RMS is about 0.5 of synthPeak/1.8 at full envelope.
		rms := math.Sqrt(sum/float64(n)) * synthPeak * 0.5 / 1.8
		out = append(out, 20*math.Log10(max(rms, 1)/32768))
	}
	return out
}

// bestOffset slides env over ref and returns the offset (blocks of ref
// before env's first) at which env's sound best follows ref, the
// correlation there, and the first and last blocks of env with sound.
func bestOffset(env, ref []float64) (lag int, corr float64, from, to int) {
	from, to = -1, -1
	for i, v := range env {
		if v > hearFloorDB {
			if from < 0 {
				from = i
			}
			to = i
		}
	}
	corr = -1
	if from < 0 {
		return 0, corr, from, to
	}
	for l := -from; l+to < len(ref); l++ {
		var a, b []float64
		for i := from; i <= to; i++ {
			if env[i] <= hearFloorDB || i+l < 0 || i+l >= len(ref) {
				continue
			}
			a, b = append(a, env[i]), append(b, ref[i+l])
		}
		if len(a) < hearMinBlocks || len(a) < (to-from+1)*6/10 {
			continue
		}
		if c := audio.Correlation(a, b); c > corr {
			lag, corr = l, c
		}
	}
	return lag, corr, from, to
}

// wordsAt is the words of s spoken over blocks [from, to] (the words
// partly in it included, as Whisper would guess them).
func wordsAt(s spokenText, from, to int) string {
	rs := []rune(s.input)
	blocks := float64(s.duration / hearBlock)
	if len(rs) == 0 || blocks <= 0 {
		return ""
	}
	perChar := blocks / float64(len(rs))
	c0 := max(0, int(float64(from)/perChar))
	c1 := min(len(rs)-1, int(float64(to)/perChar))
	if c0 > c1 {
		return ""
	}
	// Widen to whole words.
	for c0 > 0 && !isSpace(rs[c0-1]) {
		c0--
	}
	for c1 < len(rs)-1 && !isSpace(rs[c1+1]) {
		c1++
	}
	return strings.TrimSpace(string(rs[c0 : c1+1]))
}

func isSpace(r rune) bool { return r == ' ' || r == '\n' || r == '\t' }

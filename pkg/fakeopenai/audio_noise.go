package fakeopenai

import "github.com/alicia-voice/alicia/pkg/audio"

// NoiseZCR is the zero-crossing rate (crossings per sample) above which
// NoWordsInNoise takes audio for noise: white noise crosses zero about every
// other sample (0.5), voiced speech far less often (a 100-300 Hz voice with
// its formants: well under 0.2), and only fricatives come near 0.5.
const NoiseZCR = 0.3

// NoWordsInNoise hears nothing in noise — a cough, a door, a burst of
// static — as Whisper (behind speaches' VAD filter) answers an empty
// transcript for it; speech goes to next (nil: the default transcriber).
// Noise is told from speech by the zero-crossing rate of the audio's loud
// 20 ms frames (those within 20 dB of the loudest): on average above
// NoiseZCR.
func NoWordsInNoise(next Transcriber) Transcriber {
	if next == nil {
		next = defaultTranscriber
	}
	return func(r TranscriptionRequest) Transcript {
		if IsNoise(r.Samples, r.SampleRate) {
			return Transcript{}
		}
		return next(r)
	}
}

// IsNoise reports whether the loud part of samples (mono, at rate) is noise
// rather than speech; see NoWordsInNoise.
func IsNoise(samples []int16, rate int) bool {
	n := max(rate/50, 1)
	loudest := -120.0
	for off := 0; off+n <= len(samples); off += n {
		loudest = max(loudest, audio.DBFS(samples[off:off+n]))
	}
	if loudest < SilenceDBFS {
		return false // silence is the default transcriber's business
	}
	var zcr float64
	frames := 0
	for off := 0; off+n <= len(samples); off += n {
		f := samples[off : off+n]
		if audio.DBFS(f) < loudest-20 {
			continue
		}
		crossings := 0
		for i := 1; i < len(f); i++ {
			if (f[i-1] < 0) != (f[i] < 0) {
				crossings++
			}
		}
		zcr += float64(crossings) / float64(len(f)-1)
		frames++
	}
	return frames > 0 && zcr/float64(frames) > NoiseZCR
}

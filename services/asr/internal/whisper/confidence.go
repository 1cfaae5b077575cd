package whisper

import "math"

// HallucinationRatio is Whisper's own threshold: a segment whose text
// compresses better than this is a repetition loop, a failed decode.
const HallucinationRatio = 2.4

// Confidence turns segment statistics into one number in 0..1, nil without
// segments. Each segment scores exp(avg_logprob) — the mean token
// probability — times the chance it is speech at all (1 − no_speech_prob),
// halved when its compression ratio says Whisper looped; the segments are
// weighted by their duration. A clear recording scores about 0.8, mumbling
// or noise that Whisper turned into words 0.1–0.3.
func Confidence(segs []Segment) *float64 {
	if len(segs) == 0 {
		return nil
	}
	var sum, weights float64
	for _, s := range segs {
		w := s.End - s.Start
		if w <= 0 || math.IsNaN(w) {
			w = 0.01 // a zero-length segment still counts a little
		}
		p := math.Exp(min(s.AvgLogprob, 0)) * (1 - clamp01(s.NoSpeechProb))
		if s.CompressionRatio > HallucinationRatio {
			p /= 2
		}
		sum += w * clamp01(p)
		weights += w
	}
	c := math.Round(sum/weights*1000) / 1000
	return &c
}

func clamp01(f float64) float64 {
	if math.IsNaN(f) {
		return 0
	}
	return max(0, min(1, f))
}

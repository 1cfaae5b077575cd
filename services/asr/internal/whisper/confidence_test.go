package whisper_test

import (
	"math"
	"testing"

	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
)

func TestConfidence(t *testing.T) {
	for _, tc := range []struct {
		name string
		segs []whisper.Segment
		want float64 // -1: nil
	}{
		{"no segments", nil, -1},
		{"certain", []whisper.Segment{{End: 1, AvgLogprob: 0}}, 1},
		{"clear speech", []whisper.Segment{{End: 2, AvgLogprob: -0.2, NoSpeechProb: 0.05}}, 0.778},
		{"probably not speech", []whisper.Segment{{End: 2, AvgLogprob: -0.2, NoSpeechProb: 0.9}}, 0.082},
		{"mumbling", []whisper.Segment{{End: 1, AvgLogprob: -1.5, NoSpeechProb: 0.3}}, 0.156},
		{"repetition loop halved", []whisper.Segment{{End: 1, AvgLogprob: -0.2, CompressionRatio: 3.1}}, 0.409},
		{"weighted by duration", []whisper.Segment{{End: 3, AvgLogprob: 0}, {Start: 3, End: 4, AvgLogprob: -math.Inf(1)}}, 0.75},
		{"zero-length segments count equally", []whisper.Segment{{AvgLogprob: 0}, {AvgLogprob: -math.Inf(1)}}, 0.5},
		{"out-of-range statistics clamped", []whisper.Segment{{End: 1, AvgLogprob: 0.5, NoSpeechProb: -1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := whisper.Confidence(tc.segs)
			switch {
			case tc.want < 0 && got != nil:
				t.Errorf("confidence %v, want none", *got)
			case tc.want >= 0 && (got == nil || math.Abs(*got-tc.want) > 0.0005):
				t.Errorf("confidence %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNormalizeLanguage(t *testing.T) {
	for in, want := range map[string]string{
		"en": "en", "english": "en", "English": "en", " german ": "de", "en-US": "en", "pt-BR": "pt",
		"javanese": "jv", "jw": "jv", "cantonese": "yue", "haw": "haw", "mandarin": "zh", "castilian": "es",
		"": "", "klingon": "", "xx": "",
	} {
		if got := whisper.NormalizeLanguage(in); got != want {
			t.Errorf("NormalizeLanguage(%q) = %q, want %q", in, got, want)
		}
	}
}

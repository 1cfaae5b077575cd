package fakeopenai

import (
	"math"
	"unicode"
)

// synth makes voice-like audio for a text, deterministically: a harmonic
// series (a crude glottal source) at a wandering pitch, loud on letters,
// with a syllable rhythm, and a breathy floor (never digital silence) on
// spaces and punctuation. Level detectors, VADs and "is it silent" checks
// see speech in it; nobody would understand it.
type synth struct {
	text    []rune
	perChar float64 // samples per character
	total   int
	pos     int
	rate    float64
	phase   float64
}

const (
	synthPeak    = 0.3 * 32767 // about -16 dBFS RMS on voiced parts
	synthFloor   = 0.03        // relative level between words
	synthEdge    = 0.010       // seconds of fade at a word's edges
	synthPartial = 8           // harmonics
)

func newSynth(text string, total, rate int) *synth {
	rs := []rune(text)
	if len(rs) == 0 {
		rs = []rune{' '}
	}
	return &synth{text: rs, perChar: float64(total) / float64(len(rs)), total: total, rate: float64(rate)}
}

func (s *synth) left() int { return s.total - s.pos }

// next fills dst with the next samples and returns how many it wrote.
func (s *synth) next(dst []int16) int {
	n := min(len(dst), s.left())
	for i := range n {
		j := s.pos + i
		t := float64(j) / s.rate
		f0 := 150 + 25*math.Sin(2*math.Pi*t/1.1) + 10*math.Sin(2*math.Pi*t/0.37) - 20*float64(j)/float64(max(s.total, 1))
		s.phase += 2 * math.Pi * f0 / s.rate
		if s.phase > 2*math.Pi {
			s.phase -= 2 * math.Pi
		}
		v := 0.0
		for k := 1; k <= synthPartial; k++ {
			v += math.Sin(float64(k)*s.phase) / float64(k)
		}
		dst[i] = int16(max(-32767, min(32767, synthPeak*s.envelope(j)*v/1.8)))
	}
	s.pos += n
	return n
}

// envelope is the level of sample j: voiced on letters with a syllable
// rhythm of three characters, faded in and out at word edges.
func (s *synth) envelope(j int) float64 {
	c := min(int(float64(j)/s.perChar), len(s.text)-1)
	if !voiced(s.text[c]) {
		return synthFloor
	}
	syllable := 3 * s.perChar
	e := 0.7 + 0.3*math.Sin(math.Pi*math.Mod(float64(j), syllable)/syllable)
	edge := synthEdge * s.rate
	in := float64(j) - float64(c)*s.perChar        // samples into this character
	out := float64(c+1)*s.perChar - float64(j) - 1 // samples to its end
	if (c == 0 || !voiced(s.text[c-1])) && in < edge {
		e *= synthFloor + (1-synthFloor)*in/edge
	}
	if (c == len(s.text)-1 || !voiced(s.text[c+1])) && out < edge {
		e *= synthFloor + (1-synthFloor)*out/edge
	}
	return e
}

func voiced(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

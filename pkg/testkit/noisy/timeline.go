package noisy

import (
	"slices"
	"time"
)

// Span is where one utterance's sound is on a Timeline, in samples.
type Span struct {
	Start, End int    // the first sample of its sound and one past the last
	Text       string // what it says, as given
}

// Onset is when the span starts.
func (s Span) Onset() time.Duration { return Duration(s.Start) }

// Offset is when the span ends.
func (s Span) Offset() time.Duration { return Duration(s.End) }

// Timeline is audio built piece by piece with the truth about it: where
// each utterance's sound starts and ends (by Active, so silence around
// the given audio does not count). Mix noise over PCM afterwards (MixSNR);
// the spans stay true.
//
//	var tl noisy.Timeline
//	tl.Pause(time.Second)
//	tl.Say(noisy.Speech(t, text, ""), text)
//	tl.Pause(2 * time.Second)
//	mic := noisy.MixSNR(tl.PCM, noisy.Noise(t, noisy.Fan, tl.Duration()), 10)
//	// tl.Speech[0].Start: the sample where speech truly begins
type Timeline struct {
	PCM    []int16
	Speech []Span // in order of Start
}

// Place is a timeline of lead silence, speech saying text, then tail
// silence.
func Place(lead time.Duration, speech []int16, text string, tail time.Duration) Timeline {
	var tl Timeline
	tl.Pause(lead)
	tl.Say(speech, text)
	tl.Pause(tail)
	return tl
}

// Duration is the timeline's length.
func (tl *Timeline) Duration() time.Duration { return Duration(len(tl.PCM)) }

// Pause appends d of silence.
func (tl *Timeline) Pause(d time.Duration) {
	tl.PCM = append(tl.PCM, make([]int16, max(0, Samples(d)))...)
}

// Append appends audio that is not speech (noise, the answer's echo): it
// adds no span.
func (tl *Timeline) Append(pcm []int16) { tl.PCM = append(tl.PCM, pcm...) }

// Say appends an utterance and returns its span.
func (tl *Timeline) Say(speech []int16, text string) Span {
	return tl.SayAt(tl.Duration(), speech, text)
}

// SayAt adds an utterance starting at at, over whatever is there (an
// answer's echo, another utterance), lengthening the timeline if needed,
// and returns its span. at is rounded down to a sample.
func (tl *Timeline) SayAt(at time.Duration, speech []int16, text string) Span {
	start := Samples(at)
	tl.PCM = Overlay(tl.PCM, speech, at)
	first, end := Active(speech)
	s := Span{Start: start + first, End: start + end, Text: text}
	if end == 0 {
		s.End = s.Start
	}
	i, _ := slices.BinarySearchFunc(tl.Speech, s.Start, func(x Span, start int) int { return x.Start - start })
	tl.Speech = slices.Insert(tl.Speech, i, s)
	return s
}

package noisy_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit/noisy"
)

// TestTimelineMarksMatchSpeechEnergy: each span starts and ends within
// 10 ms of where its speech's energy does (the first and last 10 ms frames
// within 30 dB of its active level), not where its slice of audio with
// espeak-ng's silence began; and in the noisy mix (pink noise, 20 dB SNR)
// nothing stands 10 dB above the noise floor outside the spans.
func TestTimelineMarksMatchSpeechEnergy(t *testing.T) {
	var tl noisy.Timeline
	tl.Pause(1200 * time.Millisecond)
	for _, u := range []string{"Set a timer for ten minutes.", "Who wrote the Lord of the Rings?", "How do I boil an egg?"} {
		pcm := append(append(make([]int16, 3000), noisy.Speech(t, u, "")...), make([]int16, 2000)...)
		tl.Say(pcm, u)
		tl.Pause(900 * time.Millisecond)
	}
	if len(tl.Speech) != 3 || tl.Speech[0].Start != noisy.Samples(1200*time.Millisecond)+3000 {
		t.Fatalf("spans %+v", tl.Speech)
	}
	const frame = 160
	level := func(pcm []int16, i int) float64 {
		var p float64
		for _, v := range pcm[i*frame : (i+1)*frame] {
			p += float64(v) * float64(v)
		}
		return 10 * math.Log10(p/frame/(32768*32768)+1e-12)
	}
	for _, s := range tl.Speech {
		floor := noisy.ActiveDBFS(tl.PCM[s.Start:s.End]) - 30
		first, last := -1, -1
		for i := s.Start/frame - 20; i < s.End/frame+20; i++ {
			if level(tl.PCM, i) > floor {
				if first < 0 {
					first = i * frame
				}
				last = (i + 1) * frame
			}
		}
		if d := noisy.Duration(first - s.Start); d < -10*time.Millisecond || d > 10*time.Millisecond {
			t.Errorf("%q: speech energy starts at %v, span at %v", s.Text, noisy.Duration(first), s.Onset())
		}
		if d := noisy.Duration(s.End - last); d < -10*time.Millisecond || d > 10*time.Millisecond {
			t.Errorf("%q: speech energy ends at %v, span at %v", s.Text, noisy.Duration(last), s.Offset())
		}
	}

	mix := noisy.MixSNR(tl.PCM, noisy.Noise(t, noisy.Pink, tl.Duration()), 20)
	var floor float64
	for i := range 100 { // the first second: noise alone
		floor += level(mix, i) / 100
	}
	loud := 0
	for i := range len(mix) / frame {
		if level(mix, i) <= floor+10 {
			continue
		}
		loud++
		inside := false
		for _, s := range tl.Speech {
			inside = inside || (i*frame < s.End && (i+1)*frame > s.Start)
		}
		if !inside {
			t.Errorf("loud at %v, outside every span", noisy.Duration(i*frame))
		}
	}
	if loud < 100 {
		t.Fatalf("%d loud frames: the speech is not heard over the noise", loud)
	}
}

// TestTimelineOverlaps: a backchannel said over an answer's echo gets its
// span where it was put, in order, and the audio is the sum.
func TestTimelineOverlaps(t *testing.T) {
	answer := noisy.Speech(t, "The forecast for Paris tomorrow is mostly sunny.", "en-gb+f3")
	echo := noisy.Echo(answer, 200*time.Millisecond, 12)
	var tl noisy.Timeline
	tl.Pause(500 * time.Millisecond)
	tl.Append(echo)
	bc := noisy.Speech(t, "Mm-hmm.", "")
	late := tl.SayAt(1500*time.Millisecond, bc, "Mm-hmm.")
	early := tl.SayAt(900*time.Millisecond, bc, "Mm-hmm.")
	if early.Start != noisy.Samples(900*time.Millisecond) || early.End-early.Start != len(bc) {
		t.Fatalf("span %+v for %d samples at 900 ms", early, len(bc))
	}
	if !slices.Equal(tl.Speech, []noisy.Span{early, late}) {
		t.Fatalf("spans %+v, want in order of start", tl.Speech)
	}
	if want := noisy.Samples(500*time.Millisecond) + len(echo); len(tl.PCM) != want {
		t.Fatalf("%d samples, want %d", len(tl.PCM), want)
	}
	i := early.Start + 100
	if want := int(echo[i-noisy.Samples(500*time.Millisecond)]) + int(bc[100]); int(tl.PCM[i]) != want {
		t.Fatalf("sample %d is %d, want echo + backchannel = %d", i, tl.PCM[i], want)
	}
	if got := noisy.Overlay(nil, bc, time.Second); len(got) != noisy.Samples(time.Second)+len(bc) {
		t.Fatalf("Overlay past the end: %d samples", len(got))
	}
}

// TestUtterancesAreSpoken: every utterance and backchannel is spoken, with
// no silence around it, the backchannels short.
func TestUtterancesAreSpoken(t *testing.T) {
	if n := len(noisy.Utterances()); n < 20 {
		t.Fatalf("%d utterances", n)
	}
	for _, list := range []struct {
		texts    []string
		min, max time.Duration
	}{{noisy.Utterances(), 700 * time.Millisecond, 4 * time.Second}, {noisy.Backchannels(), 150 * time.Millisecond, 1200 * time.Millisecond}} {
		for _, u := range list.texts {
			pcm := noisy.Speech(t, u, "")
			if d := noisy.Duration(len(pcm)); d < list.min || d > list.max {
				t.Errorf("%q lasts %v, want %v–%v", u, d, list.min, list.max)
			}
			if first, end := noisy.Active(pcm); first != 0 || end != len(pcm) {
				t.Errorf("%q: silence around it (sound %d–%d of %d)", u, first, end, len(pcm))
			}
		}
	}
}

package noisy_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit/noisy"
)

// TestNoiseIsDeterministic: each kind made afresh in two empty caches (so
// sox and espeak-ng run twice) gives the same samples, and the cache files
// hold the same bytes.
func TestNoiseIsDeterministic(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	made := make([]map[noisy.Kind][]int16, 2)
	for i, dir := range dirs {
		t.Setenv("XDG_CACHE_HOME", dir)
		made[i] = map[noisy.Kind][]int16{}
		for _, k := range noisy.Kinds() {
			made[i][k] = noisy.Noise(t, k, 3*time.Second)
		}
		made[i]["speech"] = noisy.Speech(t, "Turn off the lights in the kitchen.", "en-gb+f3")
	}
	for k, a := range made[0] {
		if !slices.Equal(a, made[1][k]) {
			t.Errorf("%s: two runs made different samples", k)
		}
	}
	files := func(dir string) map[string][]byte {
		m := map[string][]byte{}
		entries, err := os.ReadDir(filepath.Join(dir, "alicia", "noisy"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, "alicia", "noisy", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			m[e.Name()] = b
		}
		return m
	}
	a, b := files(dirs[0]), files(dirs[1])
	if len(a) != len(noisy.Kinds())+1 || len(a) != len(b) {
		t.Fatalf("cache files: %d and %d, want %d", len(a), len(b), len(noisy.Kinds())+1)
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("cache file %s differs between the two runs", name)
		}
	}
}

// TestNoiseLengthAndLevel: every kind lasts what was asked, at Level dBFS,
// and nothing in it clips.
func TestNoiseLengthAndLevel(t *testing.T) {
	for _, k := range noisy.Kinds() {
		for _, d := range []time.Duration{1500 * time.Millisecond, 7*time.Second + 3*time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%v", k, d), func(t *testing.T) {
				n := noisy.Noise(t, k, d)
				if want := int(d.Seconds() * 16000); len(n) != want {
					t.Fatalf("%d samples, want %d", len(n), want)
				}
				if db := audio.DBFS(n); math.Abs(db-noisy.Level) > 0.05 {
					t.Fatalf("level %.2f dBFS, want %.1f", db, noisy.Level)
				}
				if p := peak(n); p >= 32767 {
					t.Fatalf("clipped (peak %d)", p)
				}
			})
		}
	}
}

func peak(s []int16) int {
	p := 0
	for _, v := range s {
		p = max(p, int(math.Abs(float64(v))))
	}
	return p
}

// sentences is a timeline of two utterances with pauses around them.
func sentences(t *testing.T) noisy.Timeline {
	var tl noisy.Timeline
	tl.Pause(time.Second)
	for _, u := range []string{"What time is it in Tokyo right now?", "Add milk to the shopping list."} {
		tl.Say(noisy.Speech(t, u, ""), u)
		tl.Pause(800 * time.Millisecond)
	}
	return tl
}

// measuredSNR finds how much of mix is speech (least squares) and returns
// the active level of that speech over the power of the rest, in dB.
func measuredSNR(speech, mix []int16) float64 {
	var sm, ss float64
	for i := range speech {
		sm += float64(speech[i]) * float64(mix[i])
		ss += float64(speech[i]) * float64(speech[i])
	}
	g := sm / ss
	var rest float64
	for i := range mix {
		r := float64(mix[i]) - g*float64(speech[i])
		rest += r * r
	}
	rest /= float64(len(mix))
	active := math.Pow(10, noisy.ActiveDBFS(speech)/10) * 32768 * 32768 * g * g
	return 10 * math.Log10(active/rest)
}

// TestMixSNR: the speech's active level is the asked SNR above the
// noise's, within 0.5 dB, for stationary and non-stationary noise, with
// the noise shorter than the speech (looped), and when the mix would clip
// (scaled down as a whole, SNR kept).
func TestMixSNR(t *testing.T) {
	tl := sentences(t)
	loud := noisy.Gain(tl.PCM, 20*math.Log10(32000/float64(peak(tl.PCM))))
	for _, k := range []noisy.Kind{noisy.White, noisy.Fan, noisy.Bursts, noisy.Babble} {
		for _, snr := range []float64{20, 10, 5, 0} {
			t.Run(fmt.Sprintf("%s/%gdB", k, snr), func(t *testing.T) {
				noise := noisy.Noise(t, k, tl.Duration()+time.Second)
				mix := noisy.MixSNR(tl.PCM, noise, snr)
				if len(mix) != len(tl.PCM) {
					t.Fatalf("%d samples, want the speech's %d", len(mix), len(tl.PCM))
				}
				if got := measuredSNR(tl.PCM, mix); math.Abs(got-snr) > 0.5 {
					t.Fatalf("SNR %.2f dB, want %g", got, snr)
				}
			})
		}
	}
	t.Run("looped", func(t *testing.T) {
		mix := noisy.MixSNR(tl.PCM, noisy.Noise(t, noisy.Pink, 700*time.Millisecond), 10)
		if got := measuredSNR(tl.PCM, mix); math.Abs(got-10) > 0.5 {
			t.Fatalf("SNR %.2f dB, want 10", got)
		}
	})
	t.Run("would clip", func(t *testing.T) {
		mix := noisy.MixSNR(loud, noisy.Noise(t, noisy.White, tl.Duration()), 0)
		clipped := 0
		for _, v := range mix {
			if v == math.MaxInt16 || v == math.MinInt16 {
				clipped++
			}
		}
		if clipped > 1 {
			t.Fatalf("%d samples at full scale", clipped)
		}
		if got := measuredSNR(loud, mix); math.Abs(got) > 0.5 {
			t.Fatalf("SNR %.2f dB, want 0", got)
		}
	})
}

// lagOf cross-correlates a window of answer with echo over lags up to max
// and returns the best lag and the gain at it.
func lagOf(answer, echo []int16, from, n, maxLag int) (int, float64) {
	a := answer[from : from+n]
	best, bestC := 0, math.Inf(-1)
	var aa float64
	for _, v := range a {
		aa += float64(v) * float64(v)
	}
	for lag := 0; lag <= maxLag; lag++ {
		var c float64
		e := echo[from+lag : from+lag+n]
		for i, v := range a {
			c += float64(v) * float64(e[i])
		}
		if c > bestC {
			best, bestC = lag, c
		}
	}
	return best, bestC / aa
}

// TestEchoDelayAndAttenuation: cross-correlating the answer with its echo
// gives back the delay to the sample and the attenuation to 0.1 dB; through
// a laptop speaker with a room's reverb the delay is still found within a
// millisecond.
func TestEchoDelayAndAttenuation(t *testing.T) {
	answer := noisy.Speech(t, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon.", "en-gb+f3")
	cases := []struct {
		path noisy.EchoPath
		tol  int
	}{
		{noisy.EchoPath{Delay: 120 * time.Millisecond, AttenuationDB: 6}, 0},
		{noisy.EchoPath{Delay: 250 * time.Millisecond, AttenuationDB: 12}, 0},
		{noisy.EchoPath{Delay: 400 * time.Millisecond, AttenuationDB: 20}, 0},
		{noisy.EchoPath{Delay: 250 * time.Millisecond, AttenuationDB: 12, Reverb: 300 * time.Millisecond, Speaker: true}, 16},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%gdB/reverb=%v/speaker=%v", c.path.Delay, c.path.AttenuationDB, c.path.Reverb, c.path.Speaker), func(t *testing.T) {
			echo := c.path.Apply(answer)
			if c.path.Reverb == 0 && !c.path.Speaker {
				if e := noisy.Echo(answer, c.path.Delay, c.path.AttenuationDB); !slices.Equal(e, echo) {
					t.Fatal("Echo differs from EchoPath.Apply")
				}
			}
			want := noisy.Samples(c.path.Delay)
			if min := len(answer) + want; len(echo) < min {
				t.Fatalf("%d samples, want at least %d", len(echo), min)
			}
			lag, g := lagOf(answer, echo, 8000, 8000, 9600)
			if lag < want-c.tol || lag > want+c.tol {
				t.Fatalf("delay measured %v, want %v", noisy.Duration(lag), c.path.Delay)
			}
			if c.tol == 0 {
				if att := -20 * math.Log10(g); math.Abs(att-c.path.AttenuationDB) > 0.1 {
					t.Fatalf("attenuation measured %.2f dB, want %g", att, c.path.AttenuationDB)
				}
				if got := echo[:want]; peak(got) != 0 {
					t.Fatal("sound before the delay")
				}
			}
		})
	}
}

// spread is how much the level of the sound in the speech band moves: the
// 90th minus the 10th percentile of its level over 100 ms windows, after a
// first difference (+6 dB/octave) takes out the rumble whose slow drift is
// no syllable.
func spread(pcm []int16) float64 {
	var lv []float64
	const win = 1600
	for off := 1; off+win <= len(pcm); off += win / 2 {
		var p float64
		for i := off; i < off+win; i++ {
			d := float64(pcm[i]) - float64(pcm[i-1])
			p += d * d
		}
		lv = append(lv, 10*math.Log10(p/win+1e-3))
	}
	slices.Sort(lv)
	return lv[len(lv)*9/10] - lv[len(lv)/10]
}

// TestBabbleIsSpeechLike: babble's level rises and falls like speech's (by
// more than 6 dB between its quiet and loud tenths), the stationary noises'
// does not (less than 2 dB), and Kind says so.
func TestBabbleIsSpeechLike(t *testing.T) {
	var speech noisy.Timeline
	for _, u := range noisy.Utterances()[:8] {
		speech.Say(noisy.Speech(t, u, ""), u)
		speech.Pause(300 * time.Millisecond)
	}
	if s := spread(speech.PCM); s < 6 {
		t.Fatalf("speech's level spread %.1f dB: the measure does not see speech", s)
	}
	for _, k := range noisy.Kinds() {
		if k.SpeechLike() != (k == noisy.Babble) {
			t.Errorf("%s.SpeechLike() = %v", k, k.SpeechLike())
		}
		if !k.Stationary() && !k.SpeechLike() {
			continue
		}
		s := spread(noisy.Noise(t, k, 20*time.Second))
		t.Logf("%s: level spread %.1f dB", k, s)
		switch {
		case k.SpeechLike() && s < 6:
			t.Errorf("%s: level spread %.1f dB, not speech-like", k, s)
		case k.Stationary() && s > 2:
			t.Errorf("%s: level spread %.1f dB, not stationary", k, s)
		}
	}
}

package noisy

import (
	"math"
	"math/rand/v2"
	"time"
)

// frame is the 10 ms frame speech activity is measured on.
const frame = Rate / 100

// activeRange is how far below the loudest frame a frame still counts as
// speech for ActiveDBFS: the pauses between words fall below it.
const activeRange = 40.0

// activePower is the mean power of the active 10 ms frames of pcm (those
// within activeRange dB of the loudest frame and above -70 dBFS), or 0.
func activePower(pcm []int16) float64 {
	var powers []float64
	peak := 0.0
	for off := 0; off < len(pcm); off += frame {
		p := power(pcm[off:min(off+frame, len(pcm))])
		powers = append(powers, p)
		peak = max(peak, p)
	}
	floor := max(peak*math.Pow(10, -activeRange/10), 32768*32768*math.Pow(10, -70.0/10))
	var sum float64
	var n int
	for _, p := range powers {
		if p >= floor && p > 0 {
			sum += p
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func power(s []int16) float64 {
	if len(s) == 0 {
		return 0
	}
	var sum float64
	for _, v := range s {
		sum += float64(v) * float64(v)
	}
	return sum / float64(len(s))
}

func dB(p float64) float64 {
	if p <= 0 {
		return -120
	}
	return 10 * math.Log10(p/(32768*32768))
}

// ActiveDBFS is the level of the speech in pcm, pauses left out: the RMS
// over its active 10 ms frames (those within 40 dB of the loudest and above
// -70 dBFS), in dBFS; -120 for silence. MixSNR's speech level.
func ActiveDBFS(pcm []int16) float64 { return dB(activePower(pcm)) }

// MixSNR adds noise to speech so that the speech's active level
// (ActiveDBFS) is snrDB above the noise's RMS level, the noise looped or
// cut to speech's length. The result has speech's length; when it would
// clip, the whole mix is scaled down (the SNR is kept). Silent speech gets
// the noise at its own level; silent noise leaves speech as it is.
func MixSNR(speech, noise []int16, snrDB float64) []int16 {
	out := make([]float64, len(speech))
	for i, v := range speech {
		out[i] = float64(v)
	}
	if len(noise) == 0 || len(speech) == 0 {
		return round(out)
	}
	bed := make([]int16, len(speech))
	for i := range bed {
		bed[i] = noise[i%len(noise)]
	}
	ps, pn := activePower(speech), power(bed)
	if pn == 0 {
		return round(out)
	}
	g := 1.0
	if ps > 0 {
		g = math.Sqrt(ps / (pn * math.Pow(10, snrDB/10)))
	}
	for i, v := range bed {
		out[i] += g * float64(v)
	}
	return round(out)
}

// Overlay returns base with over added from at on (at ≥ 0), lengthened if
// over runs past its end; sums saturate at full scale.
func Overlay(base, over []int16, at time.Duration) []int16 {
	start := Samples(at)
	if start < 0 {
		panic("noisy: Overlay at a negative time")
	}
	out := make([]int16, max(len(base), start+len(over)))
	copy(out, base)
	for i, v := range over {
		out[start+i] = clip(float64(out[start+i]) + float64(v))
	}
	return out
}

// EchoPath is the way the assistant's own audio takes from the person's
// speaker back into their microphone, with no echo cancellation.
type EchoPath struct {
	// Delay from the answer's sample being played to it reaching the
	// microphone (output buffers, the air, input buffers).
	Delay time.Duration
	// AttenuationDB is how much quieter the direct sound is than the
	// answer (positive: 12 means -12 dB).
	AttenuationDB float64
	// Reverb, when not 0, adds a room's tail that has decayed by 60 dB
	// after Reverb: 48 seeded reflections after the direct sound, their
	// energy together 6 dB below it.
	Reverb time.Duration
	// Speaker band-passes the sound to 300–5000 Hz (second-order
	// Butterworth each side), as a laptop's small speaker plays it.
	Speaker bool
}

// Echo is EchoPath{Delay: delay, AttenuationDB: attenuationDB}.Apply(answer).
func Echo(answer []int16, delay time.Duration, attenuationDB float64) []int16 {
	return EchoPath{Delay: delay, AttenuationDB: attenuationDB}.Apply(answer)
}

// Apply returns what the microphone picks up of answer: sample 0 is when
// the answer's first sample is played, so the echo's direct sound starts
// at Delay. Its length is the answer's plus Delay plus the reverb tail.
func (p EchoPath) Apply(answer []int16) []int16 {
	x := make([]float64, len(answer))
	for i, v := range answer {
		x[i] = float64(v)
	}
	if p.Speaker {
		x = biquad(x, highpass(300))
		x = biquad(x, lowpass(5000))
	}
	delay := max(0, Samples(p.Delay))
	taps := []tap{{0, 1}}
	if p.Reverb > 0 {
		taps = append(taps, reflections(Samples(p.Reverb))...)
	}
	tail := taps[len(taps)-1].at
	g := math.Pow(10, -p.AttenuationDB/20)
	out := make([]float64, len(x)+delay+tail)
	for _, tp := range taps {
		for i, v := range x {
			out[delay+tp.at+i] += g * tp.gain * v
		}
	}
	return round(out)
}

type tap struct {
	at   int // samples after the direct sound
	gain float64
}

// reflections are a room's: random times after 5 ms, amplitudes decaying
// by 60 dB over rt60 samples with random signs, total energy -6 dB.
func reflections(rt60 int) []tap {
	r := rand.New(rand.NewPCG(28, 4))
	start := 5 * Rate / 1000
	if rt60 <= start {
		rt60 = start + 1
	}
	taps := make([]tap, 48)
	var energy float64
	for i := range taps {
		at := start + (rt60-start)*i/len(taps) + r.IntN(max(1, (rt60-start)/len(taps)))
		a := math.Pow(10, -3*float64(at)/float64(rt60)) // -60 dB at rt60
		if r.IntN(2) == 0 {
			a = -a
		}
		taps[i] = tap{at, a}
		energy += a * a
	}
	scale := math.Sqrt(0.25 / energy)
	for i := range taps {
		taps[i].gain *= scale
	}
	return taps
}

// coefs are a biquad's, normalised (a0 = 1): RBJ's cookbook, Q = 1/√2.
type coefs struct{ b0, b1, b2, a1, a2 float64 }

func lowpass(f float64) coefs {
	w := 2 * math.Pi * f / Rate
	alpha := math.Sin(w) / (2 / math.Sqrt2)
	c, a0 := math.Cos(w), 1+alpha
	return coefs{(1 - c) / 2 / a0, (1 - c) / a0, (1 - c) / 2 / a0, -2 * c / a0, (1 - alpha) / a0}
}

func highpass(f float64) coefs {
	w := 2 * math.Pi * f / Rate
	alpha := math.Sin(w) / (2 / math.Sqrt2)
	c, a0 := math.Cos(w), 1+alpha
	return coefs{(1 + c) / 2 / a0, -(1 + c) / a0, (1 + c) / 2 / a0, -2 * c / a0, (1 - alpha) / a0}
}

func biquad(x []float64, k coefs) []float64 {
	out := make([]float64, len(x))
	var x1, x2, y1, y2 float64
	for i, v := range x {
		y := k.b0*v + k.b1*x1 + k.b2*x2 - k.a1*y1 - k.a2*y2
		x2, x1, y2, y1 = x1, v, y1, y
		out[i] = y
	}
	return out
}

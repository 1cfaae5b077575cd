package noisy

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// samplesArg is n samples as a sox time ("16000s").
func samplesArg(n int) string { return strconv.Itoa(n) + "s" }

// source is 10 s of a sox noise the bursts and clicks are cut from.
const source = 10 * Rate

// fan is a hum (50 Hz and its 2nd and 3rd harmonics, falling in level) over
// brown noise low-passed at 400 Hz: a fan's motor and its air.
func fan(n int, ts toolset) ([]int16, error) {
	return ts.sox(Rate, 4, "synth", samplesArg(n), "sine", "50", "sine", "100", "sine", "150", "brownnoise",
		"lowpass", "400", "remix", "1v0.3,2v0.2,3v0.1,4v0.4")
}

// ms is a seeded duration between lo and hi milliseconds, in samples.
func ms(r *rand.Rand, lo, hi int) int {
	return (lo + r.IntN(hi-lo+1)) * Rate / 1000
}

// bursts: pink noise cut into bursts of 50–400 ms, each at -12 to 0 dB with
// 5 ms raised-cosine edges, apart by gaps of 100–1500 ms.
func bursts(n int, ts toolset) ([]int16, error) {
	src, err := ts.sox(Rate, 1, "synth", samplesArg(source), "pinknoise")
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(28, 1))
	out := make([]float64, n)
	ramp := 5 * Rate / 1000
	for pos := ms(r, 100, 600); pos < n; {
		length, g := ms(r, 50, 400), math.Pow(10, -12*r.Float64()/20)
		from := r.IntN(len(src) - length)
		for i := 0; i < length && pos+i < n; i++ {
			env := 1.0
			if e := min(i, length-1-i); e < ramp {
				env = 0.5 - 0.5*math.Cos(math.Pi*float64(e)/float64(ramp))
			}
			out[pos+i] += g * env * float64(src[from+i])
		}
		pos += length + ms(r, 100, 1500)
	}
	return round(out), nil
}

// keyboard: typing. Each key is a click of 10–20 ms of white noise (0.3 ms
// attack, exponential decay) and, 40–90 ms later, a softer release click of
// 8 ms; keys 90–220 ms apart in words of 3–8 keys, 200–500 ms between
// words, a pause of 0.8–2.5 s every 4–12 words.
func keyboard(n int, ts toolset) ([]int16, error) {
	src, err := ts.sox(Rate, 1, "synth", samplesArg(source), "whitenoise", "highpass", "200")
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(28, 2))
	out := make([]float64, n)
	click := func(at, length int, g float64) {
		from := r.IntN(len(src) - length)
		attack := max(1, 3*Rate/10000)
		tau := float64(length) / 5
		for i := 0; i < length && at+i < n; i++ {
			env := math.Exp(-float64(i) / tau)
			if i < attack {
				env = float64(i+1) / float64(attack)
			}
			out[at+i] += g * env * float64(src[from+i])
		}
	}
	pos := ms(r, 50, 400)
	for pos < n {
		words := 4 + r.IntN(9)
		for w := 0; w < words && pos < n; w++ {
			keys := 3 + r.IntN(6)
			for k := 0; k < keys && pos < n; k++ {
				g := math.Pow(10, (r.Float64()*6-3)/20)
				click(pos, ms(r, 10, 20), g)
				click(pos+ms(r, 40, 90), 8*Rate/1000, g*0.4)
				pos += ms(r, 90, 220)
			}
			pos += ms(r, 200, 500)
		}
		pos += ms(r, 800, 2500)
	}
	return round(out), nil
}

// chords are C, A minor, F and G major (semitones from A440 as sox's %n):
// three plucked notes and the root two octaves down.
var chords = [][4]int{{-9, -5, -2, -33}, {-12, -9, -5, -36}, {-16, -12, -9, -40}, {-14, -10, -7, -38}}

// music: a bar of four plucked chords (sox synth pluck, 48 kHz, 0.5 s
// each, faded out) per chord of C–Am–F–G, and a kick drum (a 150→40 Hz
// sine sweep of 150 ms, faded) on every beat; the 8 s phrase is looped.
func music(n int, ts toolset) ([]int16, error) {
	var phrase []int16
	for _, c := range chords {
		args := []string{"synth", "0.5"}
		for _, note := range c {
			args = append(args, "pluck", "%"+strconv.Itoa(note))
		}
		args = append(args, "remix", "1v0.25,2v0.25,3v0.25,4v0.35", "fade", "q", "0.005", "0.5", "0.05", "repeat", "3")
		bar, err := ts.sox(48000, 4, args...)
		if err != nil {
			return nil, err
		}
		phrase = append(phrase, bar...)
	}
	kick, err := ts.sox(Rate, 1, "synth", "0.15", "sine", "150:40", "fade", "q", "0.002", "0.15", "0.14", "pad", "0", "0.35")
	if err != nil {
		return nil, err
	}
	out := make([]float64, n)
	for i := range out {
		j := i % len(phrase)
		out[i] = float64(phrase[j]) + 0.8*float64(kick[j%len(kick)])
	}
	return round(out), nil
}

// talker is one voice of the babble.
type talker struct {
	voice        string
	speed, pitch int
	gainDB       float64
}

// talkers are four espeak-ng voices at different speeds, pitches and
// distances (levels).
var talkers = []talker{
	{"en-us+m3", 165, 40, 0},
	{"en-gb+f3", 180, 65, -6},
	{"en-us+f4", 150, 75, -10},
	{"en-gb-scotland+m1", 195, 30, -13},
}

// babble: each talker says every utterance in its own order (one espeak-ng
// run), looped from its own seeded start; the four are summed.
func babble(n int, ts toolset) ([]int16, error) {
	texts := Utterances()
	r := rand.New(rand.NewPCG(28, 3))
	out := make([]float64, n)
	for k, tk := range talkers {
		order := append(append([]string(nil), texts[k*5%len(texts):]...), texts[:k*5%len(texts)]...)
		if k%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		pcm, err := ts.espeak(tk.voice, tk.speed, tk.pitch, strings.Join(order, " "))
		if err != nil {
			return nil, err
		}
		if len(pcm) == 0 {
			continue
		}
		g, start := math.Pow(10, tk.gainDB/20), r.IntN(len(pcm))
		for i := range out {
			out[i] += g * float64(pcm[(start+i)%len(pcm)])
		}
	}
	return round(out), nil
}

// round converts to samples, scaled down as a whole if it would clip.
func round(x []float64) []int16 {
	peak := 0.0
	for _, v := range x {
		peak = max(peak, math.Abs(v))
	}
	g := 1.0
	if peak > math.MaxInt16 {
		g = math.MaxInt16 / peak
	}
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = clip(v * g)
	}
	return out
}

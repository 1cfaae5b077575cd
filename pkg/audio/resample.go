package audio

import (
	"fmt"
	"math"
)

// Resampler converts mono 16-bit PCM from one sample rate to another as a
// stream: polyphase windowed-sinc interpolation at the exact rational ratio,
// low-passed below the lower Nyquist frequency so downsampling does not
// alias. It delays the signal by its half-width (under 1 ms); Flush emits
// the tail. Not safe for concurrent use.
type Resampler struct {
	l, m int64       // output = input * l / m
	w    int64       // half-width of the kernel, in input samples
	coef [][]float32 // [phase][2w taps]
	buf  []float32   // input samples from index base
	base int64
	next int64 // index of the next output sample
}

// NewResampler returns a resampler from rate from to rate to (Hz).
func NewResampler(from, to int) (*Resampler, error) {
	if from <= 0 || to <= 0 || from > 384000 || to > 384000 {
		return nil, fmt.Errorf("audio: resample %d Hz to %d Hz: bad rate", from, to)
	}
	g := gcd(from, to)
	r := &Resampler{l: int64(to / g), m: int64(from / g)}
	// Cutoff in cycles per input sample, a little under the lower Nyquist.
	fc := 0.5 * math.Min(1, float64(r.l)/float64(r.m)) * 0.92
	r.w = int64(math.Ceil(8 / (2 * fc)))
	r.coef = make([][]float32, r.l)
	for p := range r.l {
		frac := float64(p) / float64(r.l)
		c := make([]float32, 2*r.w)
		var sum float64
		v := make([]float64, 2*r.w)
		for k := range 2 * r.w {
			tau := frac + float64(r.w-1-k) // output time minus input index
			v[k] = 2 * fc * sinc(2*fc*tau) * window(tau, float64(r.w))
			sum += v[k]
		}
		for k := range v {
			c[k] = float32(v[k] / sum) // unity gain at DC in every phase
		}
		r.coef[p] = c
	}
	// Inputs before the first are silence.
	r.buf = make([]float32, r.w-1)
	r.base = -(r.w - 1)
	return r, nil
}

// Ratio returns how many output samples one input sample makes (to/from).
func (r *Resampler) Ratio() float64 { return float64(r.l) / float64(r.m) }

// Process resamples in and returns the output samples it makes available
// (appended to dst, which may be nil).
func (r *Resampler) Process(dst, in []int16) []int16 {
	for _, s := range in {
		r.buf = append(r.buf, float32(s))
	}
	return r.drain(dst)
}

// Flush returns the samples still held back, as if silence followed, and
// resets the resampler for a new stream.
func (r *Resampler) Flush(dst []int16) []int16 {
	end := r.base + int64(len(r.buf)) // first index past the input
	r.buf = append(r.buf, make([]float32, r.w)...)
	// Emit outputs whose time lies before the end of the input.
	for {
		t := r.next * r.m
		i, p := t/r.l, t%r.l
		if i >= end {
			break
		}
		dst = append(dst, r.sample(i, p))
		r.next++
	}
	r.buf = make([]float32, r.w-1)
	r.base = -(r.w - 1)
	r.next = 0
	return dst
}

func (r *Resampler) drain(dst []int16) []int16 {
	have := r.base + int64(len(r.buf)) // input indexes < have are known
	for {
		t := r.next * r.m
		i, p := t/r.l, t%r.l
		if i+r.w >= have {
			break
		}
		dst = append(dst, r.sample(i, p))
		r.next++
	}
	// Keep what the next output still needs: indexes >= i-w+1.
	t := r.next * r.m
	keep := t/r.l - r.w + 1
	if drop := keep - r.base; drop > 0 {
		if drop > int64(len(r.buf)) {
			drop = int64(len(r.buf))
		}
		n := copy(r.buf, r.buf[drop:])
		r.buf = r.buf[:n]
		r.base += drop
	}
	return dst
}

// sample computes the output whose time is input index i plus phase p/l;
// the taps cover input indexes i-w+1 .. i+w.
func (r *Resampler) sample(i, p int64) int16 {
	c := r.coef[p]
	start := i - r.w + 1 - r.base
	var acc float32
	for k, v := range c {
		j := start + int64(k)
		if j >= 0 && j < int64(len(r.buf)) {
			acc += v * r.buf[j]
		}
	}
	return clamp16(acc)
}

// Resample converts a whole clip.
func Resample(in []int16, from, to int) ([]int16, error) {
	if from == to {
		return append([]int16(nil), in...), nil
	}
	r, err := NewResampler(from, to)
	if err != nil {
		return nil, err
	}
	out := r.Process(make([]int16, 0, int(float64(len(in))*r.Ratio())+int(r.w)), in)
	return r.Flush(out), nil
}

func clamp16(v float32) int16 {
	switch {
	case v > 32767:
		return 32767
	case v < -32768:
		return -32768
	}
	return int16(math.Round(float64(v)))
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// window is a Blackman window over |x| <= w.
func window(x, w float64) float64 {
	if math.Abs(x) >= w {
		return 0
	}
	a := math.Pi * x / w
	return 0.42 + 0.5*math.Cos(a) + 0.08*math.Cos(2*a)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

package audio

import "math"

// RMS is the root mean square of the samples, in sample units (0–32768).
func RMS(s []int16) float64 {
	if len(s) == 0 {
		return 0
	}
	var sum float64
	for _, v := range s {
		f := float64(v)
		sum += f * f
	}
	return math.Sqrt(sum / float64(len(s)))
}

// DBFS is the RMS level relative to full scale (0 dBFS = a full-scale
// square wave); silence is -120.
func DBFS(s []int16) float64 {
	r := RMS(s)
	if r < 1e-6 {
		return -120
	}
	return 20 * math.Log10(r/32768)
}

// Correlation is the Pearson correlation of a and b (equal lengths): 0 when
// either is constant.
func Correlation(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var ab, aa, bb float64
	for i := range a {
		x, y := a[i]-ma, b[i]-mb
		ab += x * y
		aa += x * x
		bb += y * y
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

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

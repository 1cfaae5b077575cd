package noisy_test

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit/noisy"
)

// BenchmarkNoise10Minutes: ten minutes of each kind, as the false-onset
// benchmarks take them: the first call makes it (sox, espeak-ng), the
// timed ones read the cache (ns/op is one load of 19 MB).
func BenchmarkNoise10Minutes(b *testing.B) {
	for _, k := range noisy.Kinds() {
		b.Run(string(k), func(b *testing.B) {
			noisy.Noise(b, k, 10*time.Minute)
			b.ResetTimer()
			for b.Loop() {
				if n := noisy.Noise(b, k, 10*time.Minute); len(n) != 10*60*noisy.Rate {
					b.Fatalf("%d samples", len(n))
				}
			}
		})
	}
}

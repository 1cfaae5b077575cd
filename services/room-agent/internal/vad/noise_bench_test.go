package vad_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit/noisy"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// The energy VAD and the neural VAD side by side, on the test audio of
// pkg/testkit/noisy (sox and espeak-ng; deterministic). Run with
//
//	go test -run '^$' -bench 'BenchmarkFalseOnsets|BenchmarkOnsetDelay' -benchtime 1x ./internal/vad/

// vads are the two detectors' configurations.
func vads(b *testing.B) []struct {
	name string
	cfg  vad.Config
} {
	return []struct {
		name string
		cfg  vad.Config
	}{{"energy", vad.Config{}}, {"neural", vad.Config{Model: silero(b)}}}
}

// starts pushes pcm in 20 ms pieces and returns where each utterance
// started (the sample at which Start was decided).
func startsIn(b *testing.B, cfg vad.Config, pcm []int16) []int {
	b.Helper()
	d, err := vad.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var at []int
	for off := 0; off < len(pcm); off += 320 {
		end := min(off+320, len(pcm))
		d.Push(pcm[off:end], func(ev vad.Event) {
			if ev.Kind == vad.Start {
				at = append(at, end)
			}
		})
	}
	return at
}

// BenchmarkFalseOnsets: utterances started by 10 minutes of each noise
// alone (at -30 and -20 dBFS), per 10 minutes; babble is speech-like (other
// voices), so the neural VAD is not expected to reject it.
func BenchmarkFalseOnsets(b *testing.B) {
	const length = 10 * time.Minute
	for _, kind := range noisy.Kinds() {
		base := noisy.Noise(b, kind, length)
		for _, level := range []float64{-30, -20} {
			pcm := noisy.AtLevel(base, level)
			for _, v := range vads(b) {
				b.Run(fmt.Sprintf("%s/%.0fdBFS/%s", kind, level, v.name), func(b *testing.B) {
					n := 0
					for b.Loop() {
						n = len(startsIn(b, v.cfg, pcm))
					}
					b.ReportMetric(float64(n), "onsets/10min")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

// BenchmarkOnsetDelay: the test utterances, each after 1.5 s of noise and
// followed by 1.5 s of it, at 20, 10 and 5 dB SNR: the delay from the
// speech's true onset to the utterance's Start (the minimum speech of
// 150 ms is in it), p50 and p99, and the utterances missed (no Start while
// they are spoken). Not in babble: other voices are speech, heard before
// the utterance begins (BenchmarkFalseOnsets counts them).
func BenchmarkOnsetDelay(b *testing.B) {
	var spoken [][]int16
	for _, u := range noisy.Utterances() {
		spoken = append(spoken, noisy.Speech(b, u, ""))
	}
	for _, kind := range []noisy.Kind{noisy.Pink, noisy.Fan, noisy.Bursts, noisy.Keyboard, noisy.Music} {
		noise := noisy.Noise(b, kind, time.Minute)
		for _, snr := range []float64{20, 10, 5} {
			for _, v := range vads(b) {
				b.Run(fmt.Sprintf("%s/%.0fdB/%s", kind, snr, v.name), func(b *testing.B) {
					var delays []float64
					missed := 0
					for b.Loop() {
						delays, missed = delays[:0], 0
						for i, sp := range spoken {
							tl := noisy.Place(1500*time.Millisecond, sp, "", 1500*time.Millisecond)
							span := tl.Speech[0]
							off := (i * 7919) % (len(noise) - len(tl.PCM))
							mixed := noisy.MixSNR(tl.PCM, noise[off:off+len(tl.PCM)], snr)
							at := startsIn(b, v.cfg, mixed)
							i := slices.IndexFunc(at, func(a int) bool { return a > span.Start })
							if i < 0 || at[i] > span.End+8000 { // none while spoken (or within 0.5 s of its end)
								missed++
								continue
							}
							delays = append(delays, float64(noisy.Duration(at[i]-span.Start))/float64(time.Millisecond))
						}
					}
					slices.Sort(delays)
					if len(delays) > 0 {
						b.ReportMetric(delays[len(delays)/2], "p50-ms")
						b.ReportMetric(delays[(len(delays)-1)*99/100], "p99-ms")
					}
					b.ReportMetric(float64(missed), "missed")
					b.ReportMetric(float64(len(spoken)), "utterances")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

package echo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/noisy"
	"github.com/alicia-voice/alicia/services/room-agent/internal/echo"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// BenchmarkEchoFalseOnsets: 10 minutes of answers (the test utterances, one
// after the other with 0.6 s between them) played and coming back through
// the microphone along a path (delay, loss, a laptop speaker's band, a
// room's reverberation), nothing else said: the utterances started per 10
// minutes by the energy VAD and by the neural VAD, each with and without
// the canceller. Run with -benchtime 1x.
func BenchmarkEchoFalseOnsets(b *testing.B) {
	var answer16 []int16
	for _, u := range noisy.Utterances() {
		answer16 = append(answer16, noisy.Speech(b, u, "")...)
		answer16 = append(answer16, make([]int16, noisy.Samples(600*time.Millisecond))...)
	}
	var long []int16
	for len(long) < noisy.Samples(10*time.Minute) {
		long = append(long, answer16...)
	}
	long = long[:noisy.Samples(10*time.Minute)]
	answer48, err := audio.Resample(long, 16000, 48000)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := vad.FindRuntime("", "")
	if err != nil {
		testkit.Missing(b, "neural VAD runtime: %v", err)
		return
	}
	model, err := vad.LoadSilero(rt)
	if err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	for _, path := range []noisy.EchoPath{
		{Delay: 200 * time.Millisecond, AttenuationDB: 12},
		{Delay: 250 * time.Millisecond, AttenuationDB: 10, Speaker: true, Reverb: 300 * time.Millisecond},
	} {
		mic := path.Apply(long)[:len(long)]
		name := fmt.Sprintf("%v-%gdB", path.Delay, path.AttenuationDB)
		if path.Reverb > 0 {
			name += "-speaker-reverb"
		}
		for _, v := range []struct {
			name string
			cfg  vad.Config
		}{{"energy", vad.Config{}}, {"neural", vad.Config{Model: model}}} {
			for _, cancel := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/%s/canceller=%v", name, v.name, cancel), func(b *testing.B) {
					n := 0
					for b.Loop() {
						n = onsets(b, v.cfg, answer48, mic, cancel)
					}
					b.ReportMetric(float64(n), "onsets/10min")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

// onsets plays answer (48 kHz) in 20 ms frames, feeds the microphone's
// matching 20 ms (16 kHz) through the canceller (or not) and the VAD, and
// counts the utterances started.
func onsets(b *testing.B, cfg vad.Config, answer, mic []int16, cancel bool) int {
	c, err := echo.New(48000)
	if err != nil {
		b.Fatal(err)
	}
	d, err := vad.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	t0 := time.Unix(1_800_000_000, 0)
	n := 0
	for k := 0; (k+1)*320 <= len(mic); k++ {
		at := t0.Add(time.Duration(k) * 20 * time.Millisecond)
		if (k+1)*960 <= len(answer) {
			c.Played(answer[k*960:(k+1)*960], at)
		}
		f := mic[k*320 : (k+1)*320]
		if cancel {
			f = c.Process(f, at.Add(20*time.Millisecond))
		}
		d.Push(f, func(ev vad.Event) {
			if ev.Kind == vad.Start {
				n++
			}
		})
	}
	return n
}

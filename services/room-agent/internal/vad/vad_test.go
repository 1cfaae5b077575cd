package vad_test

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

const rate = 16000

func noise(d time.Duration, dbfs float64, r *rand.Rand) []int16 {
	amp := 32768 * math.Pow(10, dbfs/20) * math.Sqrt(3) // uniform noise RMS = amp/sqrt(3)
	out := make([]int16, int(d.Seconds()*rate))
	for i := range out {
		out[i] = int16((r.Float64()*2 - 1) * amp)
	}
	return out
}

// voice is speech-like: a 140 Hz harmonic series in syllables of 180 ms
// with 40 ms dips, at about -20 dBFS.
func voice(d time.Duration) []int16 {
	out := make([]int16, int(d.Seconds()*rate))
	for i := range out {
		t := float64(i) / rate
		syl := math.Mod(t, 0.22)
		env := 1.0
		if syl > 0.18 {
			env = 0.05
		}
		v := 0.0
		for h := 1; h <= 6; h++ {
			v += math.Sin(2*math.Pi*140*float64(h)*t) / float64(h)
		}
		out[i] = int16(2500 * env * v)
	}
	return out
}

func mix(parts ...[]int16) []int16 {
	var out []int16
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func add(a, b []int16) []int16 {
	out := append([]int16(nil), a...)
	for i := range out {
		if i < len(b) {
			out[i] = int16(max(-32768, min(32767, int(out[i])+int(b[i]))))
		}
	}
	return out
}

func run(t *testing.T, cfg vad.Config, pcm []int16) []vad.Event {
	t.Helper()
	d, err := vad.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var evs []vad.Event
	emit := func(e vad.Event) {
		e.Audio = append([]byte(nil), e.Audio...)
		evs = append(evs, e)
	}
	for off := 0; off < len(pcm); off += 320 { // 20 ms pushes, as the track delivers
		d.Push(pcm[off:min(off+320, len(pcm))], emit)
	}
	return evs
}

func kinds(evs []vad.Event) (start, partial, end int) {
	for _, e := range evs {
		switch e.Kind {
		case vad.Start:
			start++
		case vad.Partial:
			partial++
		case vad.End:
			end++
		}
	}
	return
}

func TestUtteranceInQuietRoom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pcm := mix(noise(time.Second, -60, r), add(voice(1500*time.Millisecond), noise(1500*time.Millisecond, -60, r)), noise(time.Second, -60, r))
	evs := run(t, vad.Config{}, pcm)
	s, p, e := kinds(evs)
	if s != 1 || e != 1 || p < 2 {
		t.Fatalf("start %d partial %d end %d, want 1, >=2, 1", s, p, e)
	}
	end := evs[len(evs)-1]
	if end.Kind != vad.End || end.Forced {
		t.Fatalf("last event %v forced=%v", end.Kind, end.Forced)
	}
	// The utterance holds the speech (1.5 s) plus pre-roll, minus nothing: 1.5–2.1 s.
	if d := audio.FramesDuration(len(end.Audio)/2, rate); d < 1500*time.Millisecond || d > 2100*time.Millisecond {
		t.Fatalf("utterance %v", d)
	}
}

func TestEndSilenceIsConfigurable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// Two phrases 400 ms apart: one utterance with 500 ms end silence, two with 300 ms.
	pcm := mix(noise(500*time.Millisecond, -60, r), voice(time.Second), noise(400*time.Millisecond, -60, r), voice(time.Second), noise(time.Second, -60, r))
	for _, c := range []struct {
		silence time.Duration
		want    int
	}{{500 * time.Millisecond, 1}, {300 * time.Millisecond, 2}} {
		_, _, e := kinds(run(t, vad.Config{EndSilence: c.silence}, pcm))
		if e != c.want {
			t.Fatalf("end silence %v: %d utterances, want %d", c.silence, e, c.want)
		}
	}
}

func TestShortNoisesAreNotSpeech(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	click := voice(60 * time.Millisecond)
	pcm := mix(noise(time.Second, -60, r), click, noise(time.Second, -60, r), click, noise(time.Second, -60, r))
	if s, _, _ := kinds(run(t, vad.Config{}, pcm)); s != 0 {
		t.Fatalf("%d utterances from 60 ms clicks", s)
	}
}

func TestNoiseFloorAdapts(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	// A fan starts at -35 dBFS and runs on: after the window it is the floor,
	// and speech over it is still found.
	pcm := mix(noise(time.Second, -65, r), noise(8*time.Second, -35, r))
	speech := add(voice(1500*time.Millisecond), noise(1500*time.Millisecond, -35, r))
	pcm = mix(pcm, speech, noise(time.Second, -35, r))
	evs := run(t, vad.Config{}, pcm)
	var ends []vad.Event
	for _, e := range evs {
		if e.Kind == vad.End {
			ends = append(ends, e)
		}
	}
	if len(ends) < 1 || len(ends) > 2 {
		t.Fatalf("%d utterances, want the speech (and at most the fan's onset)", len(ends))
	}
	last := ends[len(ends)-1]
	if d := audio.FramesDuration(len(last.Audio)/2, rate); d < 1200*time.Millisecond || d > 2500*time.Millisecond {
		t.Fatalf("speech over the fan: utterance %v", d)
	}
}

func TestMaxUtteranceForcesEnd(t *testing.T) {
	evs := run(t, vad.Config{MaxUtterance: 2 * time.Second}, voice(5*time.Second))
	forced := 0
	for _, ev := range evs {
		if ev.Kind == vad.End && ev.Forced {
			forced++
		}
	}
	if forced < 2 {
		t.Fatalf("5 s of speech with a 2 s maximum: %d forced ends", forced)
	}
	for _, ev := range evs {
		if ev.Kind == vad.End && audio.FramesDuration(len(ev.Audio)/2, rate) > 2*time.Second+100*time.Millisecond {
			t.Fatalf("utterance longer than the maximum: %v", audio.FramesDuration(len(ev.Audio)/2, rate))
		}
	}
}

func TestRealSpeech(t *testing.T) {
	bin, err := exec.LookPath("espeak-ng")
	if err != nil {
		testkit.Missing(t, "espeak-ng not installed: %v", err)
	}
	out, err := exec.Command(bin, "--stdout", "-v", "en-us", "What is the weather like in Paris tomorrow?").Output()
	if err != nil {
		t.Fatal(err)
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	speech, err := audio.Resample(w.Mono(), w.SampleRate, rate)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	pcm := mix(noise(time.Second, -60, r), add(speech, noise(audio.FramesDuration(len(speech), rate), -60, r)), noise(time.Second, -60, r))
	evs := run(t, vad.Config{EndSilence: 600 * time.Millisecond}, pcm)
	if _, _, e := kinds(evs); e != 1 {
		t.Fatalf("%d utterances in one sentence", e)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (vad.Config{Frame: time.Millisecond}).Validate(); err == nil {
		t.Fatal("1 ms frames accepted")
	}
	if err := (vad.Config{MaxUtterance: 100 * time.Millisecond, MinSpeech: 200 * time.Millisecond}).Validate(); err == nil {
		t.Fatal("max below min accepted")
	}
	if err := (vad.Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkDetector(b *testing.B) {
	d, _ := vad.New(vad.Config{})
	frame := voice(20 * time.Millisecond)
	b.SetBytes(int64(len(frame) * 2))
	for b.Loop() {
		d.Push(frame, func(vad.Event) {})
	}
}

// A silence inside an utterance gives Pause once (the utterance so far, up
// to its last speech), speech after it Resume, and a silence that ends the
// turn Pause before End with the same speech.
func TestPauseAndResume(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	q := func(d time.Duration) []int16 { return noise(d, -60, r) }
	pcm := mix(q(time.Second), add(voice(800*time.Millisecond), q(800*time.Millisecond)), q(300*time.Millisecond),
		add(voice(600*time.Millisecond), q(600*time.Millisecond)), q(time.Second))
	evs := run(t, vad.Config{PartialEvery: -1}, pcm)
	var got []vad.Kind
	var pauses []vad.Event
	for _, e := range evs {
		got = append(got, e.Kind)
		if e.Kind == vad.Pause {
			pauses = append(pauses, e)
		}
	}
	want := []vad.Kind{vad.Start, vad.Pause, vad.Resume, vad.Pause, vad.End}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	end := evs[len(evs)-1]
	last := pauses[1]
	// The last Pause holds all the speech the End holds: the End only adds
	// silence after it.
	if last.Voiced <= pauses[0].Voiced || last.Voiced > len(end.Audio) || last.Voiced > len(last.Audio) {
		t.Fatalf("pause voiced %d (first %d), its audio %d, end audio %d", last.Voiced, pauses[0].Voiced, len(last.Audio), len(end.Audio))
	}
	if string(end.Audio[:last.Voiced]) != string(last.Audio[:last.Voiced]) {
		t.Fatal("the End's audio does not start with the last Pause's speech")
	}
	// Off: no Pause at all.
	for _, e := range run(t, vad.Config{PartialEvery: -1, PauseAfter: -1}, pcm) {
		if e.Kind == vad.Pause || e.Kind == vad.Resume {
			t.Fatalf("PauseAfter -1 gave %v", e.Kind)
		}
	}
}

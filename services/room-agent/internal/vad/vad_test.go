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

// chopped is speech-like sound in on-frame pieces separated by off-frame
// silences (at -60 dBFS): 20 ms frames.
func chopped(on, off, pieces int, r *rand.Rand) []int16 {
	var out []int16
	for range pieces {
		out = append(out, voice(time.Duration(on)*20*time.Millisecond)...)
		out = append(out, noise(time.Duration(off)*20*time.Millisecond, -60, r)...)
	}
	return out
}

// startAt is the frame (20 ms, counted from the first sample) after which
// the detector started an utterance, or -1; and the detector.
func startAt(t *testing.T, cfg vad.Config, pcm []int16) (int, *vad.Detector) {
	t.Helper()
	d, err := vad.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for i := 0; (i+1)*320 <= len(pcm); i++ {
		d.Push(pcm[i*320:(i+1)*320], func(e vad.Event) {
			if e.Kind == vad.Start && at < 0 {
				at = i
			}
		})
	}
	return at, d
}

// Speech whose voiced run breaks for one silent frame every few frames (a
// stop consonant) starts an utterance once MinSpeech has passed since its
// onset, as unbroken speech does; without the hangover it never would.
func TestOnsetHangoverBridgesShortGaps(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	lead := 25 // frames of quiet before the speech
	for _, c := range []struct {
		name    string
		on, off int
	}{{"one silent frame", 2, 1}, {"two silent frames", 3, 2}, {"three silent frames", 4, 3}} {
		t.Run(c.name, func(t *testing.T) {
			pcm := mix(noise(time.Duration(lead)*20*time.Millisecond, -60, r), chopped(c.on, c.off, 20, r))
			at, d := startAt(t, vad.Config{PartialEvery: -1}, pcm)
			if at < 0 {
				t.Fatal("no utterance")
			}
			// MinSpeech (150 ms) is the 8th frame from the onset; a gap may
			// end there, so the start comes with the next speech frame.
			if since := at - lead + 1; since < 8 || since > 8+c.off {
				t.Fatalf("started %d frames after the onset, want 8-%d", since, 8+c.off)
			}
			if s, b := d.Speech(), d.SpeechBridged(); b <= s {
				t.Fatalf("speech %v, bridged %v: the gaps inside the utterance were not counted", s, b)
			}
			if at2, _ := startAt(t, vad.Config{PartialEvery: -1, OnsetHangover: -1}, pcm); c.on < 8 && at2 >= 0 {
				t.Fatalf("without hangover the utterance started at frame %d", at2)
			}
		})
	}
}

// Bursts of sound shorter than MinSpeech apart by more than the hangover
// never start an utterance, however many come.
func TestOnsetHangoverKeepsBurstsApart(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct {
		name    string
		on, off int
	}{{"60 ms bursts, 80 ms apart", 3, 4}, {"100 ms bursts, 100 ms apart", 5, 5}, {"140 ms bursts, 200 ms apart", 7, 10}} {
		t.Run(c.name, func(t *testing.T) {
			pcm := mix(noise(time.Second, -60, r), chopped(c.on, c.off, 15, r))
			if at, _ := startAt(t, vad.Config{PartialEvery: -1}, pcm); at >= 0 {
				t.Fatalf("an utterance started at frame %d", at)
			}
		})
	}
}

// Barge-in counts speech with its short gaps: SpeechBridged grows with
// the time since the onset, not only with the voiced frames.
func TestSpeechBridgedCountsShortGaps(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	pcm := mix(noise(500*time.Millisecond, -60, r), chopped(2, 1, 30, r))
	d, err := vad.New(vad.Config{PartialEvery: -1, PauseAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	onset := 25
	reached := -1
	for i := 0; (i+1)*320 <= len(pcm); i++ {
		d.Push(pcm[i*320:(i+1)*320], func(vad.Event) {})
		if reached < 0 && d.SpeechBridged() >= 200*time.Millisecond {
			reached = i - onset + 1
		}
	}
	// 200 ms is 10 frames after the onset (11 when the 10th is a gap).
	if reached < 10 || reached > 11 {
		t.Fatalf("200 ms of bridged speech %d frames after the onset, want 10-11", reached)
	}
	if d.Speech() >= d.SpeechBridged() {
		t.Fatalf("speech %v not below bridged %v", d.Speech(), d.SpeechBridged())
	}
}

package vad_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// silero loads the model from deploy/vad (task deps installs it); missing,
// the test fails under CI=true.
func silero(tb testing.TB) *vad.Silero {
	tb.Helper()
	rt, err := vad.FindRuntime("", "")
	if err != nil {
		testkit.Missing(tb, "neural VAD runtime: %v", err)
		return nil
	}
	m, err := vad.LoadSilero(rt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Close)
	return m
}

func probs(tb testing.TB, m *vad.Silero, pcm []int16) []float32 {
	tb.Helper()
	st, err := m.Stream()
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	var out []float32
	for i := 0; i+vad.SileroWindow <= len(pcm); i += vad.SileroWindow {
		p, err := st.Prob(pcm[i : i+vad.SileroWindow])
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// whiteNoise is seeded noise at about level dBFS.
func whiteNoise(n int, level float64, seed uint64) []int16 {
	r := rand.New(rand.NewPCG(seed, 1))
	amp := 32768 * math.Pow(10, level/20) * math.Sqrt(3)
	out := make([]int16, n)
	for i := range out {
		out[i] = int16((r.Float64()*2 - 1) * amp)
	}
	return out
}

func silence(d float64) []int16 { return make([]int16, int(d*16000)) }

// TestSileroMatchesReference: the probabilities of each window equal the
// reference implementation's (the browser package's Silero wrapper on ONNX
// Runtime for Node, deploy/vad/reference.mjs) on the same audio: speech,
// silence and noise, so the context and state carried between windows are
// checked, not just one window.
func TestSileroMatchesReference(t *testing.T) {
	m := silero(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testkit.Missing(t, "node (the reference implementation runs on it): %v", err)
		return
	}
	speech, err := say(espeakPath(t), "What time is it in Tokyo? Set a timer for ten minutes.")
	if err != nil {
		t.Fatal(err)
	}
	var pcm []int16
	pcm = append(pcm, silence(0.5)...)
	pcm = append(pcm, speech...)
	pcm = append(pcm, whiteNoise(16000, -30, 7)...)
	pcm = append(pcm, speech[:len(speech)/2]...) // ends mid-window
	raw := filepath.Join(t.TempDir(), "audio.s16le")
	b := make([]byte, 2*len(pcm))
	audio.PutSamples(b, pcm)
	if err := os.WriteFile(raw, b, 0o600); err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	cmd := exec.Command(node, filepath.Join(root, "deploy", "vad", "reference.mjs"), raw)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("reference: %v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var want []float64
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("reference output %q: %v", out, err)
	}
	got := probs(t, m, pcm)
	if len(got) != len(want) || len(got) != len(pcm)/vad.SileroWindow {
		t.Fatalf("%d windows here, %d in the reference, want %d", len(got), len(want), len(pcm)/vad.SileroWindow)
	}
	worst := 0.0
	speechWindows := 0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i])-want[i]))
		if want[i] > 0.5 {
			speechWindows++
		}
	}
	if worst > 1e-4 {
		t.Fatalf("largest difference from the reference %.6f, want ≤ 1e-4", worst)
	}
	// The audio has speech and non-speech: the comparison covers both.
	if speechWindows < len(got)/4 || speechWindows > len(got)*3/4 {
		t.Fatalf("%d of %d windows are speech in the reference: the test audio is not what it should be", speechWindows, len(got))
	}
}

// TestSileroHearsSpeechNotNoise: speech windows are likely speech, loud
// white noise and silence are not; Reset forgets the stream's past.
func TestSileroHearsSpeechNotNoise(t *testing.T) {
	m := silero(t)
	speech, err := say(espeakPath(t), "Could you turn the lights off in the kitchen?")
	if err != nil {
		t.Fatal(err)
	}
	mean := func(ps []float32) float64 {
		s := 0.0
		for _, p := range ps {
			s += float64(p)
		}
		return s / float64(len(ps))
	}
	if p := mean(probs(t, m, speech)); p < 0.7 {
		t.Fatalf("speech: mean probability %.2f, want ≥ 0.7", p)
	}
	for _, level := range []float64{-40, -20, -10} {
		if p := mean(probs(t, m, whiteNoise(3*16000, level, 3))); p > 0.1 {
			t.Fatalf("white noise at %v dBFS: mean probability %.2f, want ≤ 0.1", level, p)
		}
	}
	if p := mean(probs(t, m, silence(1))); p > 0.1 {
		t.Fatalf("silence: mean probability %.2f", p)
	}
	st, err := m.Stream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first := probs(t, m, speech[:4*vad.SileroWindow])
	for i := 0; i+vad.SileroWindow <= len(speech); i += vad.SileroWindow {
		if _, err := st.Prob(speech[i : i+vad.SileroWindow]); err != nil {
			t.Fatal(err)
		}
	}
	st.Reset()
	for i := range 4 {
		p, err := st.Prob(speech[i*vad.SileroWindow : (i+1)*vad.SileroWindow])
		if err != nil {
			t.Fatal(err)
		}
		if p != first[i] {
			t.Fatalf("window %d after Reset: %v, a fresh stream gives %v", i, p, first[i])
		}
	}
	if _, err := st.Prob(speech[:100]); err == nil {
		t.Fatal("a short window was taken")
	}
}

// repoRoot is the directory holding go.work.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			tb.Fatal("go.work not found above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

// TestNeuralDetector: with the model, loud noise alone starts no
// utterance; speech in it does, about when it begins, and ends after it.
func TestNeuralDetector(t *testing.T) {
	m := silero(t)
	speech, err := say(espeakPath(t), "Remind me at six to call Anna.")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		model *vad.Silero
		// starts in 3 s of white noise at -25 dBFS alone
		noiseStarts func(int) bool
	}{
		{"neural", m, func(n int) bool { return n == 0 }},
		// The energy detector, for contrast: its floor adapts to the
		// noise, so a stationary noise is no test of it; a noise that
		// comes and goes is.
		{"energy", nil, func(n int) bool { return n > 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			det, err := vad.New(vad.Config{Model: c.model})
			if err != nil {
				t.Fatal(err)
			}
			defer det.Close()
			if det.Neural() != (c.model != nil) {
				t.Fatalf("Neural() = %v", det.Neural())
			}
			var events []vad.Event
			emit := func(ev vad.Event) { events = append(events, ev) }
			// Noise that comes and goes: 400 ms bursts after 600 ms of silence.
			for i := range 3 {
				det.Push(silence(0.6), emit)
				det.Push(whiteNoise(int(0.4*16000), -25, uint64(i)), emit)
			}
			det.Push(silence(0.6), emit)
			starts := 0
			for _, ev := range events {
				if ev.Kind == vad.Start {
					starts++
				}
			}
			if !c.noiseStarts(starts) {
				t.Fatalf("%d utterances started in noise bursts alone", starts)
			}
			if c.model == nil {
				return
			}
			events = nil
			noise := whiteNoise(len(speech)+32000, -35, 9)
			mixed := make([]int16, len(noise))
			for i := range noise {
				v := int(noise[i])
				if i >= 16000 && i-16000 < len(speech) {
					v += int(speech[i-16000])
				}
				mixed[i] = int16(max(-32768, min(32767, v)))
			}
			det.Push(mixed, emit)
			det.Push(silence(1), emit)
			var start, end *vad.Event
			for i := range events {
				switch events[i].Kind {
				case vad.Start:
					if start == nil {
						start = &events[i]
					}
				case vad.End:
					end = &events[i]
				}
			}
			if start == nil || end == nil {
				t.Fatalf("speech in noise: %d events, no start or end", len(events))
			}
			if det.Prob() > 0.2 {
				t.Fatalf("probability %.2f after a second of silence", det.Prob())
			}
		})
	}
}

// TestNeuralBargeInCountsFromTheWord: with the model, the speech barge-in
// counts (SpeechBridged) runs from the word's start, to the 20 ms frame,
// as the energy detector's does, although the model decides per 32 ms
// window and is sure only a window or two after the word began.
func TestNeuralBargeInCountsFromTheWord(t *testing.T) {
	m := silero(t)
	for _, text := range []string{"What about tomorrow?", "But what about the weekend?", "Actually, stop there.", "Okay, stop, stop."} {
		t.Run(text, func(t *testing.T) {
			speech, err := say(espeakPath(t), text)
			if err != nil {
				t.Fatal(err)
			}
			det, err := vad.New(vad.Config{Model: m, PartialEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer det.Close()
			pcm := append(silence(1), speech...)
			onset, reached := -1, -1
			for i := 0; (i+1)*320 <= len(pcm); i++ {
				chunk := pcm[i*320 : (i+1)*320]
				if onset < 0 && audio.DBFS(chunk) > -50 {
					onset = i
				}
				det.Push(chunk, func(vad.Event) {})
				if reached < 0 && det.SpeechBridged() >= 200*time.Millisecond {
					reached = i
				}
			}
			// 200 ms counted with the frame that ends 200 ms after the
			// word's first frame began (the energy detector's timing).
			got := time.Duration(reached+1-onset) * 20 * time.Millisecond
			if onset < 0 || reached < 0 || got != 200*time.Millisecond {
				t.Fatalf("200 ms of speech counted %v after the word began (frames: onset %d, reached %d)", got, onset, reached)
			}
		})
	}
}

// The model closed while a stream runs windows (the process stopping with
// a room's listener still decoding a frame): the window running finishes,
// the later ones get an error, nothing is freed under a window.
func TestSileroClosedUnderAStream(t *testing.T) {
	m := silero(t)
	st, err := m.Stream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	window := make([]int16, vad.SileroWindow)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		for {
			if _, err := st.Prob(window); err != nil {
				done <- err
				return
			}
		}
	}()
	<-started
	m.Close()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a window after Close: %v", err)
	}
	m.Close() // twice is harmless (the test's cleanup closes it again)
}

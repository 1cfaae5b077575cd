package echo_test

import (
	"math"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/room-agent/internal/echo"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// speech is espeak-ng's text at rate, in Alicia's voice (en-us).
func speech(tb testing.TB, text string, rate int) []int16 {
	return voiced(tb, text, "en-us", rate)
}

// voiced is espeak-ng's text in voice at rate.
func voiced(tb testing.TB, text, voice string, rate int) []int16 {
	tb.Helper()
	bin, err := exec.LookPath("espeak-ng")
	if err != nil {
		testkit.Missing(tb, "espeak-ng: %v", err)
		return nil
	}
	out, err := exec.Command(bin, "--stdout", "-v", voice, text).Output()
	if err != nil {
		tb.Fatal(err)
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		tb.Fatal(err)
	}
	pcm, err := audio.Resample(w.Mono(), w.SampleRate, rate)
	if err != nil {
		tb.Fatal(err)
	}
	return pcm
}

// room plays answer (48 kHz) through the canceller in 20 ms frames and
// feeds the microphone: the answer's echo (delay, loss in dB) plus near
// (16 kHz) from nearAt. It returns what the canceller let through; told
// nothing played (tell false), it lets everything through. onFrame, when
// given, is called after each microphone frame with the frame's number.
func room(tb testing.TB, c *echo.Canceller, answer []int16, delay time.Duration, loss float64, near []int16, nearAt time.Duration, tell bool, onFrame ...func(k int)) []int16 {
	tb.Helper()
	t0 := time.Unix(1_800_000_000, 0)
	g := math.Pow(10, -loss/20)
	ans16, err := audio.Resample(answer, 48000, 16000)
	if err != nil {
		tb.Fatal(err)
	}
	total := len(ans16) + int(delay*16000/time.Second) + 16000
	mic := make([]float64, total)
	d := int(delay * 16000 / time.Second)
	for i, v := range ans16 {
		mic[i+d] += g * float64(v)
	}
	for i, v := range near {
		if j := int(nearAt*16000/time.Second) + i; j < total {
			mic[j] += float64(v)
		}
	}
	var out []int16
	for k := 0; (k+1)*320 <= total; k++ {
		at := t0.Add(time.Duration(k) * 20 * time.Millisecond)
		if tell && (k+1)*960 <= len(answer) {
			c.Played(answer[k*960:(k+1)*960], at)
		}
		f := make([]int16, 320)
		for i := range f {
			f[i] = int16(max(-32768, min(32767, mic[k*320+i])))
		}
		out = append(out, c.Process(f, at.Add(20*time.Millisecond))...)
		for _, fn := range onFrame {
			fn(k)
		}
	}
	return out
}

// starts runs the neural VAD (or the energy one without its runtime under
// CI=false) over pcm and returns when utterances started.
func starts(tb testing.TB, pcm []int16) []time.Duration {
	tb.Helper()
	cfg := vad.Config{}
	if rt, err := vad.FindRuntime("", ""); err == nil {
		m, err := vad.LoadSilero(rt)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(m.Close)
		cfg.Model = m
	} else {
		testkit.Missing(tb, "neural VAD runtime: %v", err)
	}
	det, err := vad.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer det.Close()
	var at []time.Duration
	for i := 0; i < len(pcm); i += 320 {
		end := min(i+320, len(pcm))
		det.Push(pcm[i:end], func(ev vad.Event) {
			if ev.Kind == vad.Start {
				at = append(at, time.Duration(end)*time.Second/16000-ev.Speech)
			}
		})
	}
	return at
}

// TestEchoAloneIsNotSpeech: the answer coming back through the microphone,
// 120-400 ms later and 6-20 dB down, starts no utterance once through the
// canceller, though it does without it; the delay found is the echo's.
func TestEchoAloneIsNotSpeech(t *testing.T) {
	answer := speech(t, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon, and a light breeze in the evening.", 48000)
	for _, c := range []struct {
		delay time.Duration
		loss  float64
	}{{120 * time.Millisecond, 6}, {250 * time.Millisecond, 12}, {400 * time.Millisecond, 20}} {
		t.Run(c.delay.String(), func(t *testing.T) {
			cc, err := echo.New(48000)
			if err != nil {
				t.Fatal(err)
			}
			through := room(t, cc, answer, c.delay, c.loss, nil, 0, true)
			if s := starts(t, through); len(s) != 0 {
				m, f := cc.Muted()
				t.Fatalf("the echo started %d utterances (first at %v); %d of %d frames muted", len(s), s[0], m, f)
			}
			// (The canceller's timeline includes its resampler's latency.)
			if d, ok := cc.Delay(); !ok || (d-c.delay).Abs() > 15*time.Millisecond {
				t.Fatalf("delay found %v (%v), want %v", d, ok, c.delay)
			}
			// Without the canceller the same microphone is speech.
			plain := room(t, passThrough(t), answer, c.delay, c.loss, nil, 0, false)
			if len(starts(t, plain)) == 0 {
				t.Fatal("the echo is not speech even without the canceller: the test proves nothing")
			}
		})
	}
}

// TestSpeechOverEchoGetsThrough: the person speaking over the answer's echo
// is heard, soon after they start.
func TestSpeechOverEchoGetsThrough(t *testing.T) {
	answer := speech(t, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon, and a light breeze in the evening.", 48000)
	near := speech(t, "Wait, what about Sunday?", 16000)
	cc, err := echo.New(48000)
	if err != nil {
		t.Fatal(err)
	}
	nearAt := 2500 * time.Millisecond
	through := room(t, cc, answer, 200*time.Millisecond, 12, near, nearAt, true)
	s := starts(t, through)
	if len(s) == 0 {
		t.Fatal("the person's speech over the echo was not heard")
	}
	onset := nearAt + time.Duration(slices.IndexFunc(near, func(v int16) bool { return v > 300 || v < -300 }))*time.Second/16000
	if s[0] < onset-100*time.Millisecond || s[0] > onset+400*time.Millisecond {
		t.Fatalf("speech heard from %v, the person started at %v", s[0], onset)
	}
}

// passThrough is a canceller that never heard anything played: it lets
// everything through.
func passThrough(t *testing.T) *echo.Canceller {
	c, err := echo.New(48000)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BenchmarkCanceller: the canceller's cost while an answer plays and its
// echo comes back, per second of audio (a core's share: core-%).
func BenchmarkCanceller(b *testing.B) {
	answer := speech(b, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon, and a light breeze in the evening.", 48000)
	var audioSec float64
	for b.Loop() {
		c, err := echo.New(48000)
		if err != nil {
			b.Fatal(err)
		}
		out := room(b, c, answer, 200*time.Millisecond, 12, nil, 0, true)
		audioSec += float64(len(out)) / 16000
	}
	b.ReportMetric(100*b.Elapsed().Seconds()/audioSec, "core-%")
}

// TestNoEchoMutesNothing: with headphones (no echo) the person's speech
// (another voice than Alicia's) over the answer passes untouched, however
// much quieter than the answer.
func TestNoEchoMutesNothing(t *testing.T) {
	answer := speech(t, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon, and a light breeze in the evening.", 48000)
	near := voiced(t, "Wait, what about Sunday?", "en-us+f3", 16000)
	for i := range near {
		near[i] /= 8 // 18 dB under the answer
	}
	cc, err := echo.New(48000)
	if err != nil {
		t.Fatal(err)
	}
	through := room(t, cc, answer, 0, 200, near, 1500*time.Millisecond, true)
	if d, ok := cc.Delay(); ok {
		t.Fatalf("a delay (%v) found without an echo", d)
	}
	if m, _ := cc.Muted(); m != 0 {
		t.Fatalf("%d frames muted without an echo", m)
	}
	if len(starts(t, through)) == 0 {
		t.Fatal("the person's speech was not heard")
	}
}

// TestProvisionalMuting: sound that begins in the microphone just after an
// answer starts may be its echo before its delay is found, but only if the
// search finds it like what was played: sound unlike the answer (the
// person's own) is never muted so, however quiet, at once or later, nor
// sound louder than the answer. (The echo's side: TestEchoAloneIsNotSpeech
// and the end-to-end TestEchoDuringAnAnswer.)
func TestProvisionalMuting(t *testing.T) {
	answer := speech(t, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon.", 48000)
	for i := range answer {
		answer[i] /= 10 // played at -20 dB: the loud sound is louder than it
	}
	hum := func(i int) int16 { return int16(400 * math.Sin(float64(i)*2*math.Pi*97/16000)) } // quiet, unlike the answer
	for _, c := range []struct {
		name                  string
		soundAt               time.Duration
		gain                  float64
		wantMutedMin, wantMax int
	}{
		{"quiet sound unlike the answer at once: nothing muted", 100 * time.Millisecond, 1, 0, 0},
		{"quiet sound a second later: nothing muted", time.Second, 1, 0, 0},
		{"loud sound at once: nothing muted", 100 * time.Millisecond, 40, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cc, err := echo.New(48000)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1_800_000_000, 0)
			muted := 0
			for k := 0; (k+1)*960 <= len(answer) && k < 100; k++ { // 2 s of 20 ms frames
				at := t0.Add(time.Duration(k) * 20 * time.Millisecond)
				cc.Played(answer[k*960:(k+1)*960], at)
				mic := make([]int16, 320)
				if d := time.Duration(k) * 20 * time.Millisecond; d >= c.soundAt {
					for i := range mic {
						mic[i] = int16(max(-32768, min(32767, c.gain*float64(hum(k*320+i)))))
					}
				}
				out := cc.Process(mic, at.Add(20*time.Millisecond))
				if slices.Max(mic) > 0 && slices.Max(out) == 0 {
					muted++
				}
			}
			if _, ok := cc.Delay(); ok {
				t.Fatal("a delay found in sound unlike the answer")
			}
			if muted < c.wantMutedMin || muted > c.wantMax {
				t.Fatalf("%d frames muted, want %d-%d", muted, c.wantMutedMin, c.wantMax)
			}
		})
	}
}

// TestEchoLike: the frames of an echo are like what was played, before its
// delay is found and after; a person's own voice over the answer (no echo,
// headphones) is not.
func TestEchoLike(t *testing.T) {
	answer := speech(t, "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon, and a light breeze in the evening.", 48000)
	like := func(near []int16, loss float64) (float64, int) {
		c, err := echo.New(48000)
		if err != nil {
			t.Fatal(err)
		}
		var yes, n int
		room(t, c, answer, 250*time.Millisecond, loss, near, 0, true, func(k int) {
			// Over the answer, once the echo (or the person) has begun.
			if k >= 20 && (k+1)*960 <= len(answer) {
				n++
				if c.EchoLike() {
					yes++
				}
			}
		})
		t.Logf("near voice %v, loss %v dB: %d of %d frames echo-like", near != nil, loss, yes, n)
		return float64(yes) / float64(n), n
	}
	if r, n := like(nil, 10); r < 0.8 {
		t.Fatalf("%.0f %% of %d echo frames like what was played, want most", 100*r, n)
	}
	near := voiced(t, "Wait, what about Sunday? Tell me about the weekend instead, and the week after that too.", "en-us+f3", 16000)
	if r, n := like(near, 200); r > 0.2 { // 200 dB: no echo at all
		t.Fatalf("%.0f %% of %d frames of a person's own voice like the answer, want few", 100*r, n)
	}
}

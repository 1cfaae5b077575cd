package audio_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
)

func sine(freq float64, rate int, d time.Duration, amp float64) []int16 {
	n := int(d.Seconds() * float64(rate))
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return out
}

// dominant returns the frequency among candidates with the most energy (Goertzel).
func power(s []int16, freq float64, rate int) float64 {
	k := 2 * math.Cos(2*math.Pi*freq/float64(rate))
	var s1, s2 float64
	for _, v := range s {
		s0 := float64(v) + k*s1 - s2
		s2, s1 = s1, s0
	}
	return s1*s1 + s2*s2 - k*s1*s2
}

func TestWAVRoundTrip(t *testing.T) {
	in := sine(440, 16000, 250*time.Millisecond, 8000)
	w, err := audio.ParseWAV(audio.EncodeWAV(in, 16000))
	if err != nil {
		t.Fatal(err)
	}
	if w.SampleRate != 16000 || w.Channels != 1 || len(w.Samples) != len(in) {
		t.Fatalf("got %d Hz %d ch %d samples", w.SampleRate, w.Channels, len(w.Samples))
	}
	for i := range in {
		if w.Samples[i] != in[i] {
			t.Fatalf("sample %d: %d != %d", i, w.Samples[i], in[i])
		}
	}
	if w.Duration() != 250*time.Millisecond {
		t.Fatalf("duration %v", w.Duration())
	}
}

func TestParseWAVStreamedHeaderAndExtraChunks(t *testing.T) {
	b := audio.EncodeWAV([]int16{1, 2, 3, 4}, 22050)
	// Insert a LIST chunk before data and set the data size to 0xFFFFFFFF, as espeak-ng --stdout does.
	list := append([]byte("LIST"), 4, 0, 0, 0, 'a', 'b', 'c', 'd')
	out := append(append(append([]byte{}, b[:36]...), list...), b[36:]...)
	copy(out[len(b[:36])+len(list)+4:], []byte{0xff, 0xff, 0xff, 0xff})
	w, err := audio.ParseWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Samples) != 4 || w.Samples[3] != 4 || w.SampleRate != 22050 {
		t.Fatalf("got %+v", w)
	}
}

func TestParseWAVRejects(t *testing.T) {
	float := audio.EncodeWAV([]int16{1}, 8000)
	float[20] = 3 // IEEE float
	eight := audio.EncodeWAV([]int16{1}, 8000)
	eight[34] = 8
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, audio.ErrNotWAV},
		{"text", []byte("hello world, not audio"), audio.ErrNotWAV},
		{"float", float, audio.ErrUnsupported},
		{"8 bit", eight, audio.ErrUnsupported},
		{"no data", audio.EncodeWAV(nil, 8000)[:36], audio.ErrNotWAV},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := audio.ParseWAV(c.in); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestResampleKeepsToneAndLength(t *testing.T) {
	cases := []struct{ from, to int }{{48000, 16000}, {24000, 48000}, {22050, 24000}, {16000, 16000}}
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			in := sine(440, c.from, time.Second, 10000)
			out, err := audio.Resample(in, c.from, c.to)
			if err != nil {
				t.Fatal(err)
			}
			if d := len(out) - c.to; d < -1 || d > 1 {
				t.Fatalf("%d→%d: %d samples, want %d", c.from, c.to, len(out), c.to)
			}
			mid := out[len(out)/4 : 3*len(out)/4]
			if r := audio.RMS(mid); math.Abs(r-10000/math.Sqrt2) > 150 {
				t.Fatalf("%d→%d: RMS %.0f, want %.0f", c.from, c.to, r, 10000/math.Sqrt2)
			}
			if p440, p1k := power(mid, 440, c.to), power(mid, 1000, c.to); p440 < 1000*p1k {
				t.Fatalf("%d→%d: 440 Hz not dominant (%g vs %g)", c.from, c.to, p440, p1k)
			}
		})
	}
}

func TestResampleRemovesAliases(t *testing.T) {
	// 12 kHz at 48 kHz is above the 8 kHz Nyquist of 16 kHz: it must vanish, not fold to 4 kHz.
	out, err := audio.Resample(sine(12000, 48000, time.Second, 10000), 48000, 16000)
	if err != nil {
		t.Fatal(err)
	}
	if db := audio.DBFS(out[1000 : len(out)-1000]); db > -50 {
		t.Fatalf("aliased energy at %.1f dBFS", db)
	}
}

func TestResampleStreamingMatchesWhole(t *testing.T) {
	in := sine(300, 48000, 500*time.Millisecond, 9000)
	whole, _ := audio.Resample(in, 48000, 16000)
	r, _ := audio.NewResampler(48000, 16000)
	var got []int16
	for off := 0; off < len(in); off += 480 {
		got = r.Process(got, in[off:min(off+480, len(in))])
	}
	got = r.Flush(got)
	if len(got) != len(whole) {
		t.Fatalf("streamed %d samples, whole %d", len(got), len(whole))
	}
	for i := range got {
		if got[i] != whole[i] {
			t.Fatalf("sample %d differs", i)
		}
	}
}

func TestLevels(t *testing.T) {
	if db := audio.DBFS(make([]int16, 100)); db != -120 {
		t.Fatalf("silence %v dBFS", db)
	}
	if db := audio.DBFS(sine(1000, 16000, 100*time.Millisecond, 32767)); math.Abs(db+3.01) > 0.1 {
		t.Fatalf("full-scale sine %v dBFS", db)
	}
}

func TestPCMFormat(t *testing.T) {
	if f := audio.PCMFormat(24000); f != "pcm_s16le_24000" {
		t.Fatal(f)
	}
	if r, err := audio.ParsePCMFormat("pcm_s16le_16000"); err != nil || r != 16000 {
		t.Fatal(r, err)
	}
	for _, bad := range []string{"opus", "pcm_s16le_", "pcm_s16le_x", "pcm_s16le_5"} {
		if _, err := audio.ParsePCMFormat(bad); !errors.Is(err, audio.ErrFormat) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

func BenchmarkResample48to16(b *testing.B) {
	in := sine(440, 48000, 20*time.Millisecond, 8000)
	r, _ := audio.NewResampler(48000, 16000)
	var out []int16
	b.SetBytes(int64(len(in) * 2))
	for b.Loop() {
		out = r.Process(out[:0], in)
	}
}

func TestCorrelation(t *testing.T) {
	x := []float64{1, 3, 2, 5, 4}
	lin, neg, flat := make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
	for i, v := range x {
		lin[i], neg[i], flat[i] = 2*v+1, -v, 7
	}
	for _, c := range []struct {
		b    []float64
		want float64
	}{{lin, 1}, {neg, -1}, {flat, 0}} {
		if got := audio.Correlation(x, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Correlation(%v, %v) = %v, want %v", x, c.b, got, c.want)
		}
	}
}

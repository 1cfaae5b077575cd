package synth_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/tts/internal/synth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func tone(freq float64, rate int, d time.Duration) []int16 {
	out := make([]int16, int(d.Seconds()*float64(rate)))
	for i := range out {
		out[i] = int16(8000 * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return out
}

// collect gathers emitted PCM.
type collect struct {
	mu    sync.Mutex
	b     []byte
	calls int
}

func (c *collect) emit(p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b = append(c.b, p...)
	c.calls++
	return nil
}

func (c *collect) samples() []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return audio.Samples(c.b)
}

// needEspeak fails under CI (which installs espeak-ng) and skips elsewhere.
func needEspeak(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		testkit.Missing(t, "espeak-ng is not installed: %v", err)
	}
}

func TestEspeakSpeaks24kHz(t *testing.T) {
	needEspeak(t)
	e, err := synth.NewEspeak(context.Background(), "espeak-ng", "en-us")
	if err != nil {
		t.Fatal(err)
	}
	if e.Engine() != "espeak:en-us" {
		t.Fatalf("engine %q", e.Engine())
	}
	cases := []struct {
		name     string
		text     string
		min, max time.Duration
	}{
		// espeak-ng speaks ~175 words per minute (~2.9 words/s) plus pauses.
		{"sentence", "Hello there, this is Alicia speaking to you.", 1500 * time.Millisecond, 5 * time.Second},
		{"leading dash is text, not an option", "-v is not a voice flag here.", 800 * time.Millisecond, 4 * time.Second},
		{"markup is read literally", "<speak>one two</speak>", 300 * time.Millisecond, 5 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got collect
			if err := e.Synthesize(context.Background(), c.text, synth.Voice{}, got.emit); err != nil {
				t.Fatal(err)
			}
			s := got.samples()
			d := audio.FramesDuration(len(s), synth.Rate)
			if d < c.min || d > c.max {
				t.Fatalf("%q: %v of audio, want %v..%v", c.text, d, c.min, c.max)
			}
			if db := audio.DBFS(s); db < -40 {
				t.Fatalf("%q: %.1f dBFS: silent", c.text, db)
			}
		})
	}
}

func TestEspeakDurationFollowsText(t *testing.T) {
	needEspeak(t)
	e, err := synth.NewEspeak(context.Background(), "espeak-ng", "en-us")
	if err != nil {
		t.Fatal(err)
	}
	length := func(text string) int {
		var c collect
		if err := e.Synthesize(context.Background(), text, synth.Voice{}, c.emit); err != nil {
			t.Fatal(err)
		}
		return len(c.samples())
	}
	short, long := length("Yes."), length("Yes, and then we walked all the way down to the harbour to watch the boats.")
	if long < 3*short {
		t.Fatalf("long sentence %d samples, short %d: duration does not follow the text", long, short)
	}
}

func TestEspeakStartupErrors(t *testing.T) {
	needEspeak(t)
	cases := []struct {
		name, path, voice string
		want              error
	}{
		{"missing binary", "espeak-ng-not-installed-here", "en-us", synth.ErrNoEspeak},
		{"missing path", "/nonexistent/espeak-ng", "en-us", synth.ErrNoEspeak},
		{"unknown voice", "espeak-ng", "xx-nonexistent", synth.ErrRejected},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := synth.NewEspeak(context.Background(), c.path, c.voice)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestEspeakCancelKillsProcess(t *testing.T) {
	needEspeak(t)
	e, err := synth.NewEspeak(context.Background(), "espeak-ng", "en-us")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := strings.Repeat("This sentence goes on and on for a very long time. ", 200)
	start := time.Now()
	err = e.Synthesize(ctx, long, synth.Voice{}, func([]byte) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancelled synthesis took %v", d)
	}
}

func TestReadWAVStreams(t *testing.T) {
	in22 := tone(440, 22050, 500*time.Millisecond)
	wav22 := audio.EncodeWAV(in22, 22050)
	streamed := append([]byte{}, wav22...)
	binary.LittleEndian.PutUint32(streamed[40:], 0xFFFFFFFF) // espeak-ng --stdout style
	withList := append(append(append([]byte{}, wav22[:36]...), append([]byte("LIST"), 3, 0, 0, 0, 'a', 'b', 'c', 0)...), wav22[36:]...)
	stereo := audio.EncodeWAV(nil, 24000)
	binary.LittleEndian.PutUint16(stereo[22:], 2)
	frames := tone(300, 24000, 200*time.Millisecond)
	binary.LittleEndian.PutUint32(stereo[40:], uint32(4*len(frames)))
	for _, v := range frames {
		stereo = binary.LittleEndian.AppendUint16(stereo, uint16(v))
		stereo = binary.LittleEndian.AppendUint16(stereo, uint16(v))
	}
	cases := []struct {
		name    string
		wav     []byte
		samples int
	}{
		{"22050 resampled", wav22, 12000},
		{"streamed size", streamed, 12000},
		{"extra chunk", withList, 12000},
		{"24k stereo downmixed", stereo, 4800},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				r    io.Reader
			}{{"whole", bytes.NewReader(c.wav)}, {"byte by byte", iotest.OneByteReader(bytes.NewReader(c.wav))}} {
				var got collect
				srv := pcmServer(t, func(w http.ResponseWriter) { _, _ = io.Copy(w, r.r) })
				o := synth.NewOpenAI(synth.OpenAIConfig{URL: srv.URL, Model: "m", Voice: "v", Format: "wav"})
				if err := o.Synthesize(context.Background(), "x", synth.Voice{}, got.emit); err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				o.Close()
				s := got.samples()
				if d := len(s) - c.samples; d < -2 || d > 2 {
					t.Fatalf("%s: %d samples, want %d", r.name, len(s), c.samples)
				}
				if rms := audio.RMS(s[len(s)/4 : 3*len(s)/4]); math.Abs(rms-8000/math.Sqrt2) > 200 {
					t.Fatalf("%s: RMS %.0f, want %.0f", r.name, rms, 8000/math.Sqrt2)
				}
			}
		})
	}
}

func TestReadWAVRejects(t *testing.T) {
	float := audio.EncodeWAV(tone(440, 24000, 10*time.Millisecond), 24000)
	binary.LittleEndian.PutUint16(float[20:], 3)
	cases := []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, synth.ErrNoAudio},
		{"not wav", []byte("this is an mp3, honest"), synth.ErrBadAudio},
		{"float", float, synth.ErrBadAudio},
		{"no data", audio.EncodeWAV(nil, 24000)[:36], synth.ErrBadAudio},
		{"header only", audio.EncodeWAV(nil, 24000), synth.ErrNoAudio},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := pcmServer(t, func(w http.ResponseWriter) { _, _ = w.Write(c.body) })
			o := synth.NewOpenAI(synth.OpenAIConfig{URL: srv.URL, Model: "m", Voice: "v", Format: "wav"})
			defer o.Close()
			if err := o.Synthesize(context.Background(), "x", synth.Voice{}, func([]byte) error { return nil }); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// pcmServer answers /v1/audio/speech with write.
func pcmServer(t *testing.T, write func(w http.ResponseWriter)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/speech" {
			http.NotFound(w, r)
			return
		}
		write(w)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOpenAIStreamsBeforeBodyEnds: the first PCM is emitted while the
// server still holds the rest of the body.
func TestOpenAIStreamsBeforeBodyEnds(t *testing.T) {
	first := audio.Bytes(tone(200, 24000, 100*time.Millisecond))
	rest := audio.Bytes(tone(200, 24000, 400*time.Millisecond))
	release := make(chan struct{})
	var (
		mu   sync.Mutex
		req  map[string]any
		auth string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Unlock()
		w.Header().Set("Content-Type", "audio/pcm")
		w.Header().Set("Transfer-Encoding", "chunked")
		_, _ = w.Write(first)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(rest)
	}))
	defer srv.Close()
	o := synth.NewOpenAI(synth.OpenAIConfig{URL: srv.URL + "/v1/", APIKey: "k1", Model: "kokoro", Voice: "af_sarah"})
	defer o.Close()
	if o.Engine() != "openai:kokoro" {
		t.Fatalf("engine %q", o.Engine())
	}
	var got collect
	early := 0
	err := o.Synthesize(context.Background(), "Hello there.", synth.Voice{}, func(p []byte) error {
		select {
		case <-release:
		default:
			early += len(p)
			if early >= len(first) {
				close(release) // only now may the server send the rest
			}
		}
		return got.emit(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	if early < len(first) {
		t.Fatalf("only %d bytes before the server sent the rest", early)
	}
	if n := len(got.samples()); n != 12000 {
		t.Fatalf("%d samples, want 12000", n)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]any{"model": "kokoro", "voice": "af_sarah", "input": "Hello there.", "response_format": "pcm"}
	for k, v := range want {
		if req[k] != v {
			t.Fatalf("request %s = %v, want %v (%v)", k, req[k], v, req)
		}
	}
	if auth != "Bearer k1" {
		t.Fatalf("Authorization %q", auth)
	}
}

func TestOpenAIAgainstFake(t *testing.T) {
	fake := fakeopenai.New(t)
	cases := []struct {
		name, url, format string
	}{
		{"pcm, URL without /v1", strings.TrimSuffix(fake.URL(), "/v1"), "pcm"},
		{"wav, URL with /v1", fake.URL(), "wav"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := synth.NewOpenAI(synth.OpenAIConfig{URL: c.url, Model: "kokoro", Voice: "af_sarah", Format: c.format})
			defer o.Close()
			text := "Twenty characters ok"
			var got collect
			if err := o.Synthesize(context.Background(), text, synth.Voice{}, got.emit); err != nil {
				t.Fatal(err)
			}
			s := got.samples()
			want := int(fakeopenai.SpeechConfig{}.Duration(text, 1) * synth.Rate / time.Second)
			if d := len(s) - want; d < -2 || d > 2 {
				t.Fatalf("%d samples, want %d", len(s), want)
			}
			if db := audio.DBFS(s); db < -40 {
				t.Fatalf("%.1f dBFS: silent", db)
			}
		})
	}
}

func TestOpenAIErrors(t *testing.T) {
	fake := fakeopenai.New(t)
	o := synth.NewOpenAI(synth.OpenAIConfig{URL: fake.URL(), Model: "kokoro", Voice: "af_sarah"})
	defer o.Close()
	cases := []struct {
		name  string
		fault fakeopenai.Fault
		want  error
	}{
		{"500", fakeopenai.Fault{Status: 500}, synth.ErrUnavailable},
		{"503", fakeopenai.Fault{Status: 503}, synth.ErrUnavailable},
		{"429", fakeopenai.Fault{Status: 429}, synth.ErrUnavailable},
		{"404", fakeopenai.Fault{Status: 404}, synth.ErrRejected},
		{"connection dropped", fakeopenai.Fault{Down: true}, synth.ErrUnavailable},
		{"body cut", fakeopenai.Fault{DropAfter: 1}, synth.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake.SetSpeechFault(c.fault)
			defer fake.SetSpeechFault(fakeopenai.Fault{})
			err := o.Synthesize(context.Background(), "A sentence long enough for several chunks of audio.", synth.Voice{}, func([]byte) error { return nil })
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("hang until cancelled", func(t *testing.T) {
		fake.SetSpeechFault(fakeopenai.Fault{Hang: true})
		defer fake.SetSpeechFault(fakeopenai.Fault{})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := o.Synthesize(ctx, "x", synth.Voice{}, func([]byte) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
	})
	t.Run("rejected input", func(t *testing.T) {
		if err := o.Synthesize(context.Background(), "", synth.Voice{}, func([]byte) error { return nil }); !errors.Is(err, synth.ErrRejected) {
			t.Fatalf("err = %v, want ErrRejected", err)
		}
	})
}

// TestEspeakVoice: a conversation's speed sets espeak-ng's words per
// minute (twice as fast: well under three quarters of the audio), its
// language picks the voice when it names none, and a voice espeak-ng does
// not have is refused (ErrRejected: the tts falls back to its own).
func TestEspeakVoice(t *testing.T) {
	needEspeak(t)
	ctx := context.Background()
	e, err := synth.NewEspeak(ctx, "espeak-ng", "en-us")
	if err != nil {
		t.Fatal(err)
	}
	length := func(v synth.Voice) (int, error) {
		n := 0
		err := e.Synthesize(ctx, "This sentence is spoken at two different rates.", v, func(p []byte) error { n += len(p); return nil })
		return n, err
	}
	normal, err := length(synth.Voice{})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := length(synth.Voice{Speed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if fast*4 > normal*3 {
		t.Fatalf("speed 2: %d bytes, speed 1: %d", fast, normal)
	}
	if _, err := length(synth.Voice{Language: "fr"}); err != nil {
		t.Fatalf("language fr: %v", err)
	}
	if _, err := length(synth.Voice{Name: "no-such-voice"}); !errors.Is(err, synth.ErrRejected) {
		t.Fatalf("unknown voice: %v", err)
	}
}

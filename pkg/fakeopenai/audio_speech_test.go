package fakeopenai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

func speechOf(input string, format openai.SpeechResponseFormat) openai.CreateSpeechRequest {
	return openai.CreateSpeechRequest{Model: "kokoro", Input: input, Voice: "af_sarah", ResponseFormat: format}
}

func readAll(t *testing.T, r io.ReadCloser) []byte {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// maxSilentRun is the longest run of 10 ms windows under -50 dBFS.
func maxSilentRun(s []int16, rate int) time.Duration {
	win := rate / 100
	run, longest := 0, 0
	for i := 0; i+win <= len(s); i += win {
		if audio.DBFS(s[i:i+win]) < -50 {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return time.Duration(longest) * 10 * time.Millisecond
}

func TestSpeech(t *testing.T) {
	const input = "Hello there. It is sunny in Paris today!"
	for _, tc := range []struct {
		name  string
		req   openai.CreateSpeechRequest
		rate  int
		speed float64
	}{
		{"pcm", speechOf(input, openai.SpeechResponseFormatPcm), 24000, 1},
		{"wav", speechOf(input, openai.SpeechResponseFormatWav), 24000, 1},
		{"fast", func() openai.CreateSpeechRequest {
			r := speechOf(input, openai.SpeechResponseFormatPcm)
			r.Speed = 2
			return r
		}(), 24000, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeopenai.New(t)
			raw, err := client(s, "").CreateSpeech(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, raw)
			var samples []int16
			if tc.req.ResponseFormat == openai.SpeechResponseFormatWav {
				w, err := audio.ParseWAV(body)
				if err != nil {
					t.Fatal(err)
				}
				if w.SampleRate != tc.rate || w.Channels != 1 || len(body) != 44+2*len(w.Samples) {
					t.Fatalf("wav %d Hz %d channels, %d bytes for %d samples", w.SampleRate, w.Channels, len(body), len(w.Samples))
				}
				samples = w.Samples
			} else {
				samples = audio.Samples(body)
			}
			want := time.Duration(float64(len(input)) * float64(fakeopenai.DefaultSpeechPerChar) / tc.speed)
			if got := audio.FramesDuration(len(samples), tc.rate); got != want || got != (fakeopenai.SpeechConfig{}).Duration(input, tc.speed) {
				t.Errorf("audio lasts %s, want %s", got, want)
			}
			if db := audio.DBFS(samples); db < -25 || db > -6 {
				t.Errorf("level %.1f dBFS, want speech-like", db)
			}
			// Quiet between words, never a long silence.
			if run := maxSilentRun(samples, tc.rate); run > 100*time.Millisecond {
				t.Errorf("silent for %s in a row", run)
			}
			if r := s.SpeechRequests(); len(r) != 1 || r[0].Input != input || r[0].Voice != "af_sarah" || r[0].Model != "kokoro" || r[0].Speed != tc.req.Speed {
				t.Errorf("recorded %+v", r)
			}
		})
	}
}

// The body streams: the first chunk arrives after FirstByte, long before
// the last, over chunked transfer encoding.
func TestSpeechStreams(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithSpeech(fakeopenai.SpeechConfig{
		FirstByte: 80 * time.Millisecond, Chunk: 50 * time.Millisecond, ChunkDelay: 20 * time.Millisecond, SampleRate: 16000,
	}))
	body, _ := json.Marshal(map[string]any{"model": "kokoro", "input": strings.Repeat("a", 20), "voice": "af_sarah", "response_format": "pcm"})
	start := time.Now()
	resp, err := http.Post(s.URL()+"/audio/speech", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" || resp.Header.Get("Content-Type") != "audio/pcm" {
		t.Fatalf("status %d, transfer encoding %v, type %q", resp.StatusCode, resp.TransferEncoding, resp.Header.Get("Content-Type"))
	}
	buf := make([]byte, 64)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	// 20 characters × 60 ms = 1.2 s at 16 kHz in 24 chunks of 50 ms.
	if n := len(buf) + len(rest); n != 2*19200 {
		t.Errorf("%d bytes, want %d", n, 2*19200)
	}
	if first < 80*time.Millisecond || total < 80*time.Millisecond+23*20*time.Millisecond || first > total/2 {
		t.Errorf("first bytes after %s, all after %s", first, total)
	}
}

func TestSpeechRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   openai.CreateSpeechRequest
		param string
	}{
		{"mp3", speechOf("hi", openai.SpeechResponseFormatMp3), "response_format"},
		{"default format is mp3", speechOf("hi", ""), "response_format"},
		{"opus", speechOf("hi", openai.SpeechResponseFormatOpus), "response_format"},
		{"no input", speechOf("", openai.SpeechResponseFormatPcm), "input"},
		{"no voice", openai.CreateSpeechRequest{Model: "kokoro", Input: "hi", ResponseFormat: "pcm"}, "voice"},
		{"too fast", openai.CreateSpeechRequest{Model: "kokoro", Input: "hi", Voice: "af_sarah", ResponseFormat: "pcm", Speed: 5}, "speed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeopenai.New(t)
			_, err := client(s, "").CreateSpeech(t.Context(), tc.req)
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" {
				t.Fatalf("err = %v, want an OpenAI 400", err)
			}
			if apiErr.Param == nil || *apiErr.Param != tc.param {
				t.Errorf("param = %v, want %q", apiErr.Param, tc.param)
			}
			if r := s.SpeechRequests(); s.SpeechCount() != 1 || r[0].Rejected == "" {
				t.Errorf("recorded %+v", r)
			}
		})
	}
}

func TestSpeechSampleRate(t *testing.T) {
	s := fakeopenai.New(t)
	body, _ := json.Marshal(map[string]any{"model": "kokoro", "input": "hello", "voice": "af_sarah", "response_format": "wav", "sample_rate": 48000})
	resp, err := http.Post(s.URL()+"/audio/speech", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	w, err := audio.ParseWAV(readAll(t, resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	if w.SampleRate != 48000 || w.Duration() != 300*time.Millisecond {
		t.Errorf("%d Hz, %s", w.SampleRate, w.Duration())
	}
}

func TestSpeechFaults(t *testing.T) {
	req := speechOf("A sentence long enough for several chunks.", openai.SpeechResponseFormatPcm)
	t.Run("fail next", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.FailNextSpeech(1, http.StatusInternalServerError)
		if _, err := client(s, "").CreateSpeech(t.Context(), req); statusOf(err) != http.StatusInternalServerError {
			t.Fatalf("err = %v, want 500", err)
		}
		raw, err := client(s, "").CreateSpeech(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(readAll(t, raw)); n == 0 {
			t.Error("no audio after recovery")
		}
		if s.SpeechCount() != 2 {
			t.Errorf("count = %d", s.SpeechCount())
		}
	})
	t.Run("cut mid-body", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.SetSpeechFault(fakeopenai.Fault{DropAfter: 2})
		raw, err := client(s, "").CreateSpeech(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		b, err := io.ReadAll(raw)
		if err == nil {
			t.Fatalf("clean end after %d bytes, want a transport error", len(b))
		}
		if want := 2 * 2 * 2400; len(b) != want {
			t.Errorf("got %d bytes before the cut, want %d (two chunks)", len(b), want)
		}
	})
	t.Run("latency", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.SetSpeechFault(fakeopenai.Fault{Latency: 100 * time.Millisecond})
		start := time.Now()
		raw, err := client(s, "").CreateSpeech(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, raw)
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("answered after %s", d)
		}
	})
}

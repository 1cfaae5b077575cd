package fakeopenai_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// tone is d of a 220 Hz tone at rate, about -13 dBFS: speech to the fake.
func tone(d time.Duration, rate int) []int16 {
	n := int(d * time.Duration(rate) / time.Second)
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(10000 * math.Sin(2*math.Pi*220*float64(i)/float64(rate)))
	}
	return out
}

func transcriptionOf(wav []byte, format openai.AudioResponseFormat) openai.AudioRequest {
	return openai.AudioRequest{Model: "whisper-large-v3", FilePath: "utterance.wav", Reader: bytes.NewReader(wav),
		Format: format, Language: "en", Prompt: "Previously: hello."}
}

func TestTranscriptionVerboseJSON(t *testing.T) {
	s := fakeopenai.New(t)
	wav := audio.EncodeWAV(tone(2*time.Second, 16000), 16000)
	resp, err := client(s, "").CreateTranscription(t.Context(), transcriptionOf(wav, openai.AudioResponseFormatVerboseJSON))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != fakeopenai.DefaultTranscript || resp.Task != "transcribe" || resp.Language != "en" || resp.Duration != 2 {
		t.Errorf("response = %+v", resp)
	}
	// "Hello Alicia, what is the weather like today?" is one sentence.
	if len(resp.Segments) != 1 {
		t.Fatalf("segments = %+v", resp.Segments)
	}
	seg := resp.Segments[0]
	if seg.Start != 0 || seg.End != 2 || seg.AvgLogprob != fakeopenai.DefaultAvgLogprob || seg.NoSpeechProb != fakeopenai.DefaultNoSpeechProb ||
		len(seg.Tokens) != 8 || seg.CompressionRatio <= 0 || seg.Text != " "+fakeopenai.DefaultTranscript {
		t.Errorf("segment = %+v", seg)
	}
	reqs := s.TranscriptionRequests()
	if len(reqs) != 1 || s.TranscriptionCount() != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "whisper-large-v3" || r.Language != "en" || r.Prompt != "Previously: hello." || r.ResponseFormat != "verbose_json" ||
		r.Filename != "utterance.wav" || r.Rejected != "" {
		t.Errorf("request = %+v", r)
	}
	if r.SampleRate != 16000 || r.Channels != 1 || r.Duration != 2*time.Second || len(r.Samples) != 32000 || r.LevelDBFS < -20 {
		t.Errorf("audio: %d Hz, %d channels, %s, %d samples, %.1f dBFS", r.SampleRate, r.Channels, r.Duration, len(r.Samples), r.LevelDBFS)
	}
}

func TestTranscriptionFormats(t *testing.T) {
	wav := audio.EncodeWAV(tone(time.Second, 16000), 16000)
	for _, f := range []openai.AudioResponseFormat{"", openai.AudioResponseFormatJSON, openai.AudioResponseFormatText, openai.AudioResponseFormatVerboseJSON} {
		t.Run(string(f)+"_", func(t *testing.T) {
			s := fakeopenai.New(t)
			s.EnqueueTranscripts(fakeopenai.Transcript{Text: "Turn on the lights."})
			resp, err := client(s, "").CreateTranscription(t.Context(), transcriptionOf(wav, f))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Turn on the lights." {
				t.Errorf("text = %q", resp.Text)
			}
			if verbose := f == openai.AudioResponseFormatVerboseJSON; verbose != (len(resp.Segments) > 0) {
				t.Errorf("segments = %d for %q", len(resp.Segments), f)
			}
		})
	}
}

func TestTranscriptionWords(t *testing.T) {
	s := fakeopenai.New(t)
	s.EnqueueTranscripts(fakeopenai.Transcript{Text: "One two. Three four five!", Language: "english"})
	req := transcriptionOf(audio.EncodeWAV(tone(time.Second, 16000), 16000), openai.AudioResponseFormatVerboseJSON)
	req.TimestampGranularities = []openai.TranscriptionTimestampGranularity{openai.TranscriptionTimestampGranularityWord, openai.TranscriptionTimestampGranularitySegment}
	resp, err := client(s, "").CreateTranscription(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Language != "english" || len(resp.Segments) != 2 || len(resp.Words) != 5 {
		t.Fatalf("language %q, %d segments, %d words", resp.Language, len(resp.Segments), len(resp.Words))
	}
	// Time is shared by text length: "One two." 8 runes of 24.
	if s0, s1 := resp.Segments[0], resp.Segments[1]; s0.End != s1.Start || s1.End != 1 || math.Abs(s0.End-8.0/24) > 0.001 {
		t.Errorf("segment times %v-%v, %v-%v", s0.Start, s0.End, s1.Start, s1.End)
	}
	if w := resp.Words[4]; w.Word != "five!" || w.End != 1 {
		t.Errorf("last word = %+v", w)
	}
	if got := s.TranscriptionRequests()[0].TimestampGranularities; len(got) != 2 {
		t.Errorf("granularities = %v", got)
	}
}

func TestTranscriptionScripts(t *testing.T) {
	s := fakeopenai.New(t)
	c := client(s, "")
	transcribe := func(d time.Duration) openai.AudioResponse {
		t.Helper()
		resp, err := c.CreateTranscription(t.Context(), transcriptionOf(audio.EncodeWAV(tone(d, 16000), 16000), openai.AudioResponseFormatVerboseJSON))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Queued transcripts first, in order; then the transcriber.
	s.EnqueueTranscripts(fakeopenai.Transcript{Segments: []fakeopenai.Segment{
		{Text: "mumble", AvgLogprob: -1.4, NoSpeechProb: 0.7},
		{Start: 400 * time.Millisecond, End: 900 * time.Millisecond, Text: "hm"},
	}})
	s.SetTranscriber(fakeopenai.Growing("what is the time in Tokyo", 300*time.Millisecond))
	got := transcribe(time.Second)
	if got.Text != "mumble hm" || got.Segments[0].AvgLogprob != -1.4 || got.Segments[0].NoSpeechProb != 0.7 || got.Segments[1].Start != 0.4 {
		t.Errorf("scripted = %+v", got)
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{100 * time.Millisecond, "what"},
		{600 * time.Millisecond, "what is"},
		{700 * time.Millisecond, "what is the"},
		{5 * time.Second, "what is the time in Tokyo"},
	} {
		if got := transcribe(tc.d).Text; got != tc.want {
			t.Errorf("after %s: %q, want %q", tc.d, got, tc.want)
		}
	}
	s.SetTranscriber(nil)
	if got := transcribe(time.Second).Text; got != fakeopenai.DefaultTranscript {
		t.Errorf("default = %q", got)
	}
}

// Whisper behind a VAD hears nothing in silence.
func TestTranscriptionSilence(t *testing.T) {
	s := fakeopenai.New(t)
	resp, err := client(s, "").CreateTranscription(t.Context(),
		transcriptionOf(audio.EncodeWAV(make([]int16, 16000), 16000), openai.AudioResponseFormatVerboseJSON))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "" || len(resp.Segments) != 0 || resp.Duration != 1 {
		t.Errorf("silence heard as %+v", resp)
	}
}

func TestTranscriptionRejects(t *testing.T) {
	wav := audio.EncodeWAV(tone(time.Second, 16000), 16000)
	stereo := audio.EncodeWAV(tone(time.Second, 16000), 16000)
	stereo[22] = 2 // two channels: half a second of audio
	for _, tc := range []struct {
		name string
		req  openai.AudioRequest
		want string
	}{
		{"raw PCM", transcriptionOf(audio.Bytes(tone(time.Second, 16000)), ""), "Invalid file format"},
		{"mp3", transcriptionOf([]byte("ID3\x04\x00\x00\x00\x00\x00\x00"), ""), "Invalid file format"},
		{"too short", transcriptionOf(audio.EncodeWAV(tone(50*time.Millisecond, 16000), 16000), ""), "too short"},
		{"empty WAV", transcriptionOf(audio.EncodeWAV(nil, 16000), ""), "too short"},
		{"no model", openai.AudioRequest{FilePath: "a.wav", Reader: bytes.NewReader(wav)}, "model"},
		{"srt", transcriptionOf(wav, openai.AudioResponseFormatSRT), "response_format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeopenai.New(t)
			_, err := client(s, "").CreateTranscription(t.Context(), tc.req)
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.want) {
				t.Fatalf("err = %v, want a 400 about %q", err, tc.want)
			}
			if r := s.TranscriptionRequests(); len(r) != 1 || r[0].Rejected == "" {
				t.Errorf("recorded %+v, want one rejected request", r)
			}
		})
	}
	t.Run("stereo", func(t *testing.T) {
		s := fakeopenai.New(t)
		if _, err := client(s, "").CreateTranscription(t.Context(), transcriptionOf(stereo, "")); err != nil {
			t.Fatal(err)
		}
		if r := s.TranscriptionRequests()[0]; r.Channels != 2 || r.Duration != 500*time.Millisecond || len(r.Samples) != 8000 {
			t.Errorf("stereo parsed as %d channels, %s, %d samples", r.Channels, r.Duration, len(r.Samples))
		}
	})
}

func TestTranscriptionFaults(t *testing.T) {
	wav := audio.EncodeWAV(tone(time.Second, 16000), 16000)
	// Each request needs its own reader.
	req := func() openai.AudioRequest { return transcriptionOf(wav, openai.AudioResponseFormatVerboseJSON) }
	t.Run("fail next", func(t *testing.T) {
		s := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("chat ok")))
		c := client(s, "")
		s.FailNextTranscriptions(2, http.StatusInternalServerError)
		for range 2 {
			if _, err := c.CreateTranscription(t.Context(), req()); statusOf(err) != http.StatusInternalServerError {
				t.Fatalf("err = %v, want 500", err)
			}
		}
		// Chat is not broken by a transcription fault.
		if _, err := c.CreateChatCompletion(t.Context(), userMessage("hi")); err != nil {
			t.Fatalf("chat: %v", err)
		}
		if _, err := c.CreateTranscription(t.Context(), req()); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	})
	t.Run("scripted status", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.EnqueueTranscripts(fakeopenai.Transcript{Status: http.StatusServiceUnavailable})
		if _, err := client(s, "").CreateTranscription(t.Context(), req()); statusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("err = %v, want 503", err)
		}
	})
	t.Run("latency", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.SetTranscriptionFault(fakeopenai.Fault{Latency: 100 * time.Millisecond})
		s.EnqueueTranscripts(fakeopenai.Transcript{Text: "slow", Latency: 100 * time.Millisecond})
		start := time.Now()
		if _, err := client(s, "").CreateTranscription(t.Context(), req()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("answered after %s, want ≥ 200ms", d)
		}
	})
	t.Run("hang", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.EnqueueTranscripts(fakeopenai.Transcript{Hang: true})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := client(s, "").CreateTranscription(ctx, req())
			done <- err
		}()
		testkit.Eventually(t, 2*time.Second, func() bool { return s.TranscriptionCount() == 1 && s.Active() == 1 }, "request held")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want canceled", err)
		}
	})
	t.Run("server down", func(t *testing.T) {
		s := fakeopenai.New(t)
		s.SetFault(fakeopenai.Fault{Down: true})
		if _, err := client(s, "").CreateTranscription(t.Context(), req()); err == nil || statusOf(err) != 0 {
			t.Fatalf("err = %v, want a transport error", err)
		}
		// The endpoint's own fault wins over the server's.
		s.SetTranscriptionFault(fakeopenai.Fault{Status: http.StatusTooManyRequests})
		if _, err := client(s, "").CreateTranscription(t.Context(), req()); statusOf(err) != http.StatusTooManyRequests {
			t.Fatalf("err = %v, want 429", err)
		}
	})
}

package whisper_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, f *fakeopenai.Server, attempts int) *whisper.Client {
	t.Helper()
	c := whisper.New(whisper.Config{BaseURL: f.URL(), APIKey: "k", Model: "whisper-large-v3", Timeout: 300 * time.Millisecond,
		Attempts: attempts, Backoff: 5 * time.Millisecond})
	t.Cleanup(c.Close)
	return c
}

func wav(d time.Duration) []byte {
	s := make([]int16, int(d*16000/time.Second))
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*180*float64(i)/16000))
	}
	return audio.EncodeWAV(s, 16000)
}

func TestTranscribe(t *testing.T) {
	f := fakeopenai.New(t, fakeopenai.WithAPIKey("k"))
	f.EnqueueTranscripts(fakeopenai.Transcript{Language: "english", Segments: []fakeopenai.Segment{
		{Text: " What time is it?", AvgLogprob: -0.2, NoSpeechProb: 0.1},
	}})
	res, err := newClient(t, f, 3).Transcribe(t.Context(), whisper.Request{WAV: wav(1500 * time.Millisecond), Language: "en", Prompt: "Hi."})
	if err != nil {
		t.Fatal(err)
	}
	want := math.Round(math.Exp(-0.2)*0.9*1000) / 1000
	if res.Text != "What time is it?" || res.Language != "en" || res.Duration != 1500*time.Millisecond ||
		len(res.Segments) != 1 || res.Confidence == nil || *res.Confidence != want || res.Attempts != 1 {
		t.Errorf("result %+v (confidence %v, want %v)", res, res.Confidence, want)
	}
	r := f.TranscriptionRequests()[0]
	if r.ResponseFormat != "verbose_json" || r.Language != "en" || r.Prompt != "Hi." || r.Model != "whisper-large-v3" ||
		r.Duration != 1500*time.Millisecond || r.SampleRate != 16000 {
		t.Errorf("request %+v", r)
	}
}

func TestTranscribeFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    fakeopenai.Fault
		failNext int // instead of fault: fail this many, then answer
		status   int
		attempts int
		want     error // nil: succeeds
		requests int
	}{
		{"recovers after two 500s", fakeopenai.Fault{}, 2, http.StatusInternalServerError, 3, nil, 3},
		{"500 every time", fakeopenai.Fault{Status: http.StatusInternalServerError}, 0, 0, 3, whisper.ErrUnavailable, 3},
		{"503 tried once", fakeopenai.Fault{Status: http.StatusServiceUnavailable}, 0, 0, 1, whisper.ErrUnavailable, 1},
		{"429", fakeopenai.Fault{Status: http.StatusTooManyRequests}, 0, 0, 2, whisper.ErrUnavailable, 2},
		{"timeout", fakeopenai.Fault{Hang: true}, 0, 0, 2, whisper.ErrUnavailable, 2},
		{"cut", fakeopenai.Fault{Down: true}, 0, 0, 2, whisper.ErrUnavailable, 2},
		{"401 not retried", fakeopenai.Fault{Status: http.StatusUnauthorized}, 0, 0, 3, whisper.ErrUnavailable, 1},
		{"400 rejected", fakeopenai.Fault{Status: http.StatusBadRequest}, 0, 0, 3, whisper.ErrRejected, 1},
		{"413 rejected", fakeopenai.Fault{Status: http.StatusRequestEntityTooLarge}, 0, 0, 3, whisper.ErrRejected, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeopenai.New(t)
			f.SetTranscriptionFault(tc.fault)
			if tc.failNext > 0 {
				f.FailNextTranscriptions(tc.failNext, tc.status)
			}
			res, err := newClient(t, f, 3).Transcribe(t.Context(), whisper.Request{WAV: wav(time.Second), Attempts: tc.attempts})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.want == nil && res.Attempts != tc.requests:
				t.Errorf("attempts = %d", res.Attempts)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if n := f.TranscriptionCount(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// A caller that gives up gets its own error back, not "unavailable".
func TestTranscribeCanceled(t *testing.T) {
	f := fakeopenai.New(t)
	f.SetTranscriptionFault(fakeopenai.Fault{Hang: true})
	c := whisper.New(whisper.Config{BaseURL: f.URL(), Model: "m", Timeout: 10 * time.Second, Attempts: 3})
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Transcribe(ctx, whisper.Request{WAV: wav(time.Second)})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, whisper.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if n := f.TranscriptionCount(); n != 1 {
		t.Errorf("%d requests after the caller gave up", n)
	}
}

func TestReachable(t *testing.T) {
	f := fakeopenai.New(t)
	c := newClient(t, f, 1)
	if err := c.Reachable(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.SetFault(fakeopenai.Fault{Down: true})
	if err := c.Reachable(t.Context()); err == nil {
		t.Fatal("a down backend is reachable")
	}
}

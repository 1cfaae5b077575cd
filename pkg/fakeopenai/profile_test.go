package fakeopenai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// The durations are pure functions of the profile's parameters.
func TestProfileDurations(t *testing.T) {
	p := fakeopenai.GPUBox
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"transcription of 3 s", p.TranscriptionTime(3 * time.Second), 100*time.Millisecond + 3*69*time.Millisecond},
		{"transcription of 0 s", p.TranscriptionTime(0), 100 * time.Millisecond},
		{"token interval at 140/s", p.TokenInterval(), 7142857},
		{"first token", p.TokenAt(0), 150 * time.Millisecond},
		{"token 10", p.TokenAt(10), 150*time.Millisecond + 10*7142857},
		{"empty answer", p.ChatTime(0), 150 * time.Millisecond},
		{"answer of 1 token", p.ChatTime(1), 150 * time.Millisecond},
		{"answer of 141 tokens", p.ChatTime(141), 150*time.Millisecond + 140*7142857},
		{"first audio", p.SpeechAudioAt(0), 300 * time.Millisecond},
		{"audio from 3.5 s", p.SpeechAudioAt(3500 * time.Millisecond), 400 * time.Millisecond},
		{"synthesis of 7 s", p.SpeechTime(7 * time.Second), 500 * time.Millisecond},
		{"embedding 3 inputs", p.EmbeddingsTime(3), 35 * time.Millisecond},
		{"embedding nothing", p.EmbeddingsTime(0), 20 * time.Millisecond},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	var zero fakeopenai.Profile
	for name, d := range map[string]time.Duration{
		"transcription": zero.TranscriptionTime(time.Minute), "interval": zero.TokenInterval(), "chat": zero.ChatTime(500),
		"speech": zero.SpeechTime(time.Minute), "audio at": zero.SpeechAudioAt(time.Minute), "embeddings": zero.EmbeddingsTime(100),
	} {
		if d != 0 {
			t.Errorf("zero profile: %s takes %s", name, d)
		}
	}
	if !zero.IsInstant() || !fakeopenai.Instant.IsInstant() || fakeopenai.GPUBox.IsInstant() {
		t.Error("IsInstant: want the zero profile and instant instant, gpu-box not")
	}
	for s, want := range map[string]int{"": 0, "a": 1, " is": 1, "Hello": 1, " answer": 2, "abcdefghij": 3, "héllo wörld": 3} {
		if got := fakeopenai.EstimateTokens(s); got != want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestProfileByName(t *testing.T) {
	if got := fakeopenai.ProfileNames(); strings.Join(got, ",") != "gpu-box,instant" {
		t.Errorf("ProfileNames() = %v", got)
	}
	for name, want := range map[string]fakeopenai.Profile{"instant": fakeopenai.Instant, "gpu-box": fakeopenai.GPUBox} {
		if p, err := fakeopenai.ProfileByName(name); err != nil || p != want {
			t.Errorf("ProfileByName(%q) = %+v, %v", name, p, err)
		}
	}
	_, err := fakeopenai.ProfileByName("gpu")
	if err == nil || !strings.Contains(err.Error(), `"gpu"`) || !strings.Contains(err.Error(), "gpu-box, instant") {
		t.Errorf("unknown profile: %v; want the name and the known ones", err)
	}
}

// paced is a profile slow enough to measure, quick enough for a unit test.
var paced = fakeopenai.Profile{
	Transcription: fakeopenai.TranscriptionTiming{Fixed: 40 * time.Millisecond, PerAudioSecond: 50 * time.Millisecond},
	Chat:          fakeopenai.ChatTiming{TimeToFirstToken: 120 * time.Millisecond, TokensPerSecond: 100},
	Speech:        fakeopenai.SpeechTiming{TimeToFirstAudio: 150 * time.Millisecond, RealTimeFactor: 0.25},
	Embeddings:    fakeopenai.EmbeddingsTiming{Fixed: 30 * time.Millisecond, PerInput: 20 * time.Millisecond},
}

// The first delta comes no earlier than the time to first token and each
// one no earlier than its last token at the profile's tokens per second.
// Lower bounds only: a loaded machine may be later, never earlier.
func TestProfileChatStreamPace(t *testing.T) {
	s := fakeopenai.New(t)
	s.SetProfile(paced) // at run time; WithProfile is the same from the start
	const answer = "One two three, a longer sentence follows here."
	s.Enqueue(fakeopenai.Text(answer))
	req := userMessage("hi")
	req.Stream = true
	start := time.Now()
	st, err := client(s, "").CreateChatCompletionStream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens, content := 0, ""
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		at := time.Since(start)
		if len(resp.Choices) == 0 || resp.Choices[0].Delta.Content == "" {
			continue
		}
		d := resp.Choices[0].Delta.Content
		content += d
		tokens += fakeopenai.EstimateTokens(d)
		if due := paced.TokenAt(tokens - 1); at < due {
			t.Errorf("delta %q (token %d) after %s, before its time %s", d, tokens, at, due)
		}
	}
	if content != answer {
		t.Errorf("content %q", content)
	}
	if total := time.Since(start); total < paced.ChatTime(tokens) || tokens < 10 {
		t.Errorf("%d tokens streamed in %s, want at least %s", tokens, total, paced.ChatTime(tokens))
	}
}

// A non-streamed answer waits for the whole generation.
func TestProfileChatWhole(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithProfile(paced))
	const answer = "Four words of answer."
	s.Enqueue(fakeopenai.Text(answer))
	start := time.Now()
	resp, err := client(s, "").CreateChatCompletion(t.Context(), userMessage("hi"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for _, w := range fakeopenai.Words(answer) {
		tokens += fakeopenai.EstimateTokens(w)
	}
	if took, want := time.Since(start), paced.ChatTime(tokens); took < want || resp.Choices[0].Message.Content != answer {
		t.Errorf("answer %q after %s, want after at least %s", resp.Choices[0].Message.Content, took, want)
	}
}

// postSpeech asks for pcm speech of input; stream nil leaves it out.
func postSpeech(t *testing.T, ctx context.Context, url, input string, stream *bool) *http.Response {
	t.Helper()
	in := map[string]any{"model": "kokoro", "input": input, "voice": "af_sarah", "response_format": "pcm"}
	if stream != nil {
		in["stream"] = *stream
	}
	body, _ := json.Marshal(in)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/audio/speech", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("speech: status %d", resp.StatusCode)
	}
	return resp
}

// Speech's first bytes come after the time to first audio, the rest as
// the real-time factor synthesises it; not streamed, after all of it.
func TestProfileSpeech(t *testing.T) {
	cfg := fakeopenai.SpeechConfig{SampleRate: 16000, Chunk: 100 * time.Millisecond, PerChar: 50 * time.Millisecond}
	s := fakeopenai.New(t, fakeopenai.WithSpeech(cfg), fakeopenai.WithProfile(paced))
	input := strings.Repeat("a", 16) // 800 ms of audio: 8 chunks
	length := cfg.Duration(input, 1)

	start := time.Now()
	resp := postSpeech(t, t.Context(), s.URL(), input, nil)
	buf := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	rest := readAll(t, resp.Body)
	total := time.Since(start)
	if n := len(buf) + len(rest); n != 2*16000*int(length/time.Millisecond)/1000 {
		t.Errorf("%d bytes for %s", n, length)
	}
	// The last chunk starts 700 ms into the audio.
	if last := paced.SpeechAudioAt(length - cfg.Chunk); first < paced.SpeechAudioAt(0) || total < last {
		t.Errorf("first bytes after %s (want ≥ %s), all after %s (want ≥ %s)", first, paced.SpeechAudioAt(0), total, last)
	}

	whole := false
	start = time.Now()
	resp = postSpeech(t, t.Context(), s.URL(), input, &whole)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	first = time.Since(start)
	readAll(t, resp.Body)
	if want := paced.SpeechTime(length); first < want {
		t.Errorf("not streamed: first bytes after %s, want ≥ %s", first, want)
	}
}

func TestProfileTranscriptionAndEmbeddings(t *testing.T) {
	s := fakeopenai.New(t, fakeopenai.WithProfile(paced))
	c := client(s, "")
	const utterance = 1500 * time.Millisecond
	start := time.Now()
	if _, err := c.CreateTranscription(t.Context(), transcriptionOf(audio.EncodeWAV(tone(utterance, 16000), 16000), openai.AudioResponseFormatJSON)); err != nil {
		t.Fatal(err)
	}
	if took, want := time.Since(start), paced.TranscriptionTime(utterance); took < want {
		t.Errorf("transcription of %s after %s, want ≥ %s", utterance, took, want)
	}
	start = time.Now()
	embed(t, c, openai.EmbeddingRequest{Model: "bge-m3", Input: []string{"one", "two", "three"}})
	if took, want := time.Since(start), paced.EmbeddingsTime(3); took < want {
		t.Errorf("3 embeddings after %s, want ≥ %s", took, want)
	}
}

// A paced answer stopped by its client ends at once: the handler returns
// instead of pacing the rest of a minute-long answer to nobody.
func TestProfileCancelEndsStream(t *testing.T) {
	slow := fakeopenai.Profile{
		Chat:   fakeopenai.ChatTiming{TokensPerSecond: 0.1},  // 10 s a token
		Speech: fakeopenai.SpeechTiming{RealTimeFactor: 100}, // 10 s per 100 ms chunk
	}
	h := fakeopenai.NewHandler(fakeopenai.WithProfile(slow), fakeopenai.WithFallback(fakeopenai.Text("one two three four five six")))
	done := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- r.URL.Path
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	url := srv.URL + "/v1"
	returned := func(what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a failure bound, not a measurement
			t.Fatalf("%s: the handler still runs after the client stopped", what)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = url
	req := userMessage("hi")
	req.Stream = true
	st, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the role and the first word
		t.Fatal(err)
	}
	cancel()
	st.Close()
	returned("chat stream")

	ctx, cancel = context.WithCancel(t.Context())
	resp := postSpeech(t, ctx, url, strings.Repeat("a", 40), nil)
	if _, err := io.ReadFull(resp.Body, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	returned("speech stream")
}

package devcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/sentence"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/cli/internal/devcmd"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/tts"
)

// modelEnv are the variables fake-models reads, as the services do.
var modelEnv = []string{"ALICIA_LLM_URL", "ALICIA_LLM_MODEL", "ALICIA_ASR_URL", "ALICIA_ASR_MODEL",
	"ALICIA_TTS_URL", "ALICIA_TTS_MODEL", "ALICIA_TTS_ENGINE", "ALICIA_EMBEDDING_URL", "ALICIA_EMBEDDING_MODEL"}

// cleanEnv unsets them for the test: the defaults apply.
func cleanEnv(t *testing.T) {
	for _, k := range modelEnv {
		t.Setenv(k, "")
	}
}

// runFakeModels starts fake-models with cfg until the test ends, returns
// what it printed once every URL answers, and checks it stops cleanly.
func runFakeModels(t *testing.T, cfg devcmd.FakeModelsConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out testkit.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- devcmd.FakeModels(ctx, cfg, &out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("FakeModels after Ctrl-C: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("FakeModels did not stop within 10s of Ctrl-C")
		}
	})
	for _, u := range []string{cfg.LLM.URL, cfg.ASR.URL, cfg.TTS.URL, cfg.Embeddings.URL} {
		if u == "" {
			continue
		}
		testkit.EventuallyNoError(t, 5*time.Second, func() error {
			_, err := client(u).ListModels(ctx)
			return err
		}, "GET %s/models", u)
	}
	return out.String()
}

// client is go-openai pointed at base, as the services configure it.
func client(base string) *openai.Client {
	c := openai.DefaultConfig("")
	c.BaseURL = engines.V1(base)
	return openai.NewClientWithConfig(c)
}

func listed(t *testing.T, base string) []string {
	t.Helper()
	list, err := client(base).ListModels(t.Context())
	if err != nil {
		t.Fatalf("GET %s/models: %v", base, err)
	}
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestFakeModelsDefaultsAreTheServices: without ALICIA_* variables, the
// fake serves the URLs and models the services use by default.
func TestFakeModelsDefaultsAreTheServices(t *testing.T) {
	cleanEnv(t)
	cfg := devcmd.FakeModelsConfigFromEnv()
	for _, c := range []struct {
		name             string
		got, want        devcmd.FakeBackend
		sameURLAsService bool
	}{
		{"llm", cfg.LLM, devcmd.FakeBackend{URL: llm.DefaultConfig().LLMURL, Model: llm.DefaultConfig().Model}, true},
		{"asr", cfg.ASR, devcmd.FakeBackend{URL: asr.DefaultConfig().URL, Model: asr.DefaultConfig().Model}, true},
		{"tts", cfg.TTS, devcmd.FakeBackend{URL: tts.DefaultConfig().URL, Model: tts.DefaultConfig().Model}, true},
		// memory has no default embeddings URL; the fake serves them beside the LLM.
		{"embeddings", cfg.Embeddings, devcmd.FakeBackend{Model: memory.DefaultConfig().EmbeddingModel}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.got.Model != c.want.Model || engines.V1(c.got.URL) != engines.V1(c.want.URL) {
				t.Errorf("fake serves %+v, the service uses %+v", c.got, c.want)
			}
			if c.sameURLAsService && !strings.HasPrefix(c.got.URL, "http://127.0.0.1:") {
				t.Errorf("default URL %s is not on 127.0.0.1", c.got.URL)
			}
		})
	}

	t.Setenv("ALICIA_LLM_MODEL", "my-llm")
	t.Setenv("ALICIA_ASR_URL", "http://127.0.0.1:9/v1")
	t.Setenv("ALICIA_EMBEDDING_MODEL", "my-embedder")
	cfg = devcmd.FakeModelsConfigFromEnv()
	if cfg.LLM.Model != "my-llm" || cfg.ASR.URL != "http://127.0.0.1:9/v1" || cfg.Embeddings.Model != "my-embedder" || cfg.TTS.Model != tts.DefaultConfig().Model {
		t.Errorf("with ALICIA_* set: %+v", cfg)
	}
}

// TestFakeModelsOnOneListener: the default layout (every backend on one
// host:port) on a free port: each endpoint answers in the wire format the
// services read, /models lists exactly the configured models, and the
// probe of alicia up and server-info finds every engine usable.
func TestFakeModelsOnOneListener(t *testing.T) {
	cleanEnv(t)
	addr := testkit.FreeAddr(t)
	cfg := devcmd.FakeModelsConfigFromEnv()
	cfg.WordDelay = time.Millisecond
	cfg.LLM.URL, cfg.ASR.URL, cfg.TTS.URL = "http://"+addr+"/v1", "http://"+addr+"/v1", "http://"+addr
	out := runFakeModels(t, cfg)
	base := "http://" + addr + "/v1"
	c := client(base)

	want := []string{engines.DefaultLLMModel, engines.DefaultASRModel, engines.DefaultTTSModel, engines.DefaultEmbeddingModel}
	if got := listed(t, base); !slices.Equal(got, want) {
		t.Errorf("GET /models = %v, want %v", got, want)
	}
	if !strings.Contains(out, base+"  (GET /models lists "+strings.Join(want, ", ")+")") ||
		!strings.Contains(out, "export ALICIA_LLM_URL="+base+" ALICIA_ASR_URL="+base+" ALICIA_TTS_URL=http://"+addr+" ALICIA_EMBEDDING_URL="+base+"\n") {
		t.Errorf("printed:\n%s", out)
	}

	t.Run("probe", func(t *testing.T) {
		for _, e := range []engines.Engine{
			{URL: base, Model: engines.DefaultLLMModel},
			{URL: base, Model: engines.DefaultASRModel},
			{URL: engines.V1("http://" + addr), Model: engines.DefaultTTSModel, Voice: engines.DefaultVoice(engines.OpenAI)},
			{URL: base, Model: engines.DefaultEmbeddingModel},
		} {
			if st := engines.Probe(t.Context(), nil, e, 2*time.Second); !st.Reachable {
				t.Errorf("probe of %s: %+v", e.Model, st)
			}
		}
	})

	t.Run("chat streams a canned answer", func(t *testing.T) {
		said := "What should I cook tonight? Something with lentils."
		st, err := c.CreateChatCompletionStream(t.Context(), openai.ChatCompletionRequest{Model: engines.DefaultLLMModel, Stream: true,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "You are Alicia."}, {Role: openai.ChatMessageRoleUser, Content: said}}})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var text strings.Builder
		pieces, split := 0, sentence.New()
		var sentences []string
		for {
			resp, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
				pieces++
				text.WriteString(resp.Choices[0].Delta.Content)
				sentences = append(sentences, split.Push(resp.Choices[0].Delta.Content)...)
			}
		}
		got := text.String()
		if !strings.HasPrefix(got, devcmd.CannedMarker+" ") || !strings.Contains(got, said) || pieces < 20 {
			t.Errorf("answer in %d pieces: %q", pieces, got)
		}
		// A few sentences, completed while the answer streams, as the llm
		// service splits them: sentence streaming shows.
		if len(sentences) < 3 {
			t.Errorf("%d sentences done before the end of the stream: %q", len(sentences), sentences)
		}
	})

	t.Run("the prompt optimiser's judge, reflection and a brief prompt", func(t *testing.T) {
		judge := func(answer string) map[string]any {
			t.Helper()
			in, _ := json.Marshal(map[string]string{"question": "What now?", "answer": answer})
			resp, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: engines.DefaultLLMModel,
				ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
				Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "You judge an answer. Score correctness, faithfulness and relevancy."},
					{Role: openai.ChatMessageRoleUser, Content: string(in)}}})
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &v); err != nil {
				t.Fatalf("verdict %q: %v", resp.Choices[0].Message.Content, err)
			}
			return v
		}
		if long, short := judge(strings.Repeat("word ", 40)), judge("Yes."); long["relevancy"] != 0.4 || short["relevancy"] != 1.0 ||
			!strings.Contains(long["rationale"].(string), "too long") || !strings.Contains(long["rationale"].(string), "Canned") {
			t.Errorf("verdicts: long %v, short %v", long, short)
		}
		ask := func(system, user string) string {
			t.Helper()
			resp, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: engines.DefaultLLMModel,
				Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: system}, {Role: openai.ChatMessageRoleUser, Content: user}}})
			if err != nil {
				t.Fatal(err)
			}
			return resp.Choices[0].Message.Content
		}
		proposal := ask("You rewrite instructions.", "I provided an assistant with the following instructions:\n```\nYou are Alicia.\n```\nFeedback: The answer is too long.")
		if !strings.HasPrefix(proposal, "```\nYou are Alicia. Keep every answer to one short sentence.") || !strings.Contains(proposal, "Canned") {
			t.Errorf("proposal %q", proposal)
		}
		if got := ask("You are Alicia. Keep every answer to one short sentence.", "Hello"); len(strings.Fields(got)) > 20 || !strings.HasPrefix(got, devcmd.CannedMarker) {
			t.Errorf("brief answer %q", got)
		}
	})

	t.Run("memory extraction gets its JSON", func(t *testing.T) {
		for said, memories := range map[string]int{"Please remember that I am allergic to peanuts.": 1, "Hello there.": 0} {
			resp, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: engines.DefaultLLMModel,
				Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "Extract."}, {Role: openai.ChatMessageRoleUser, Content: "User: " + said + "\n\nAssistant: Noted."}},
				ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
					JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "memories", Schema: json.RawMessage(`{"type":"object"}`), Strict: true}}})
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Memories []struct {
					Content    string   `json:"content"`
					Tags       []string `json:"tags"`
					Importance float64  `json:"importance"`
				} `json:"memories"`
			}
			if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &got); err != nil || len(got.Memories) != memories {
				t.Fatalf("%q: extraction answer %q (%v)", said, resp.Choices[0].Message.Content, err)
			}
			if memories > 0 && (!strings.Contains(got.Memories[0].Content, "allergic to peanuts") || len(got.Memories[0].Tags) == 0) {
				t.Errorf("memory = %+v", got.Memories[0])
			}
		}
	})

	t.Run("transcription", func(t *testing.T) {
		for name, c := range map[string]struct {
			samples []int16
			want    string
		}{"speech": {tone(1500*time.Millisecond, 16000), devcmd.CannedTranscript}, "silence": {make([]int16, 16000), ""}} {
			resp, err := client(base).CreateTranscription(t.Context(), openai.AudioRequest{Model: engines.DefaultASRModel, FilePath: "speech.wav",
				Reader: bytes.NewReader(audio.EncodeWAV(c.samples, 16000)), Format: openai.AudioResponseFormatVerboseJSON,
				TimestampGranularities: []openai.TranscriptionTimestampGranularity{openai.TranscriptionTimestampGranularitySegment}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != c.want || (c.want != "" && (len(resp.Segments) == 0 || !strings.Contains(resp.Text, "alicia dev fake-models"))) {
				t.Errorf("%s: transcript %+v", name, resp)
			}
		}
	})

	t.Run("speech", func(t *testing.T) {
		for _, format := range []openai.SpeechResponseFormat{openai.SpeechResponseFormatWav, openai.SpeechResponseFormatPcm} {
			res, err := client("http://"+addr).CreateSpeech(t.Context(), openai.CreateSpeechRequest{Model: engines.DefaultTTSModel,
				Input: "Hello, this is the fake speech.", Voice: "af_sarah", ResponseFormat: format})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res)
			res.Close()
			if err != nil {
				t.Fatal(err)
			}
			pcm := b
			if format == openai.SpeechResponseFormatWav {
				wav, err := audio.ParseWAV(b)
				if err != nil || wav.SampleRate != 24000 {
					t.Fatalf("wav: %v, %+v", err, wav.SampleRate)
				}
				pcm = audio.Bytes(wav.Mono())
			}
			// 31 characters of speech: well over a second at 24 kHz, not silent.
			if len(pcm) < 2*24000 || len(pcm)%2 != 0 || audio.DBFS(audio.Samples(pcm)) < -40 {
				t.Errorf("%s: %d bytes of audio at %.1f dBFS", format, len(pcm), audio.DBFS(audio.Samples(pcm)))
			}
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		resp, err := c.CreateEmbeddings(t.Context(), openai.EmbeddingRequestStrings{Model: engines.DefaultEmbeddingModel,
			Input: []string{"I like tea", "I like green tea"}, EncodingFormat: openai.EmbeddingEncodingFormatFloat})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Data) != 2 || len(resp.Data[0].Embedding) != 1024 || len(resp.Data[1].Embedding) != 1024 {
			t.Fatalf("embeddings: %d vectors", len(resp.Data))
		}
		if sim := dot(resp.Data[0].Embedding, resp.Data[1].Embedding); sim < 0.5 {
			t.Errorf("similar texts have cosine %.2f", sim)
		}
	})
}

// TestFakeModelsOnSeveralListeners: backends on different addresses and
// paths each get their own model list, and a listener per address.
func TestFakeModelsOnSeveralListeners(t *testing.T) {
	cleanEnv(t)
	a, b := testkit.FreeAddr(t), testkit.FreeAddr(t)
	cfg := devcmd.FakeModelsConfig{
		LLM:        devcmd.FakeBackend{URL: "http://" + a + "/v1", Model: "my-llm"},
		Embeddings: devcmd.FakeBackend{URL: "http://" + a + "/embed/v1", Model: "my-embedder"},
		ASR:        devcmd.FakeBackend{URL: "http://" + b + "/v1", Model: "my-whisper"},
		TTS:        devcmd.FakeBackend{URL: "http://" + b, Model: "my-kokoro"},
	}
	out := runFakeModels(t, cfg)
	for base, want := range map[string][]string{cfg.LLM.URL: {"my-llm"}, cfg.Embeddings.URL: {"my-embedder"}, cfg.ASR.URL: {"my-whisper", "my-kokoro"}} {
		if got := listed(t, base); !slices.Equal(got, want) {
			t.Errorf("GET %s/models = %v, want %v", base, got, want)
		}
	}
	if _, err := client(cfg.Embeddings.URL).CreateEmbeddings(t.Context(), openai.EmbeddingRequestStrings{Model: "my-embedder", Input: []string{"tea"}}); err != nil {
		t.Errorf("embeddings under a path: %v", err)
	}
	if st := engines.Probe(t.Context(), nil, engines.Engine{URL: engines.V1(cfg.TTS.URL), Model: "my-kokoro"}, 2*time.Second); !st.Reachable {
		t.Errorf("tts probe: %+v", st)
	}
	if st := engines.Probe(t.Context(), nil, engines.Engine{URL: cfg.LLM.URL, Model: "my-whisper"}, 2*time.Second); st.Reachable || !st.Answers {
		t.Errorf("the LLM's server lists the ASR model: %+v", st)
	}
	if strings.Count(out, "(GET /models lists") != 3 {
		t.Errorf("printed:\n%s", out)
	}
}

// TestFakeModelsAddressInUse: a model server already there is an error
// naming the address, and nothing stays bound.
func TestFakeModelsAddressInUse(t *testing.T) {
	cleanEnv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := testkit.FreeAddr(t)
	cfg := devcmd.FakeModelsConfig{
		LLM: devcmd.FakeBackend{URL: "http://" + free + "/v1", Model: "m"}, ASR: devcmd.FakeBackend{URL: "http://" + free + "/v1", Model: "m"},
		TTS: devcmd.FakeBackend{URL: "http://" + busy.Addr().String(), Model: "k"}, Embeddings: devcmd.FakeBackend{Model: "e"},
	}
	err = devcmd.FakeModels(t.Context(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), busy.Addr().String()) || !strings.Contains(err.Error(), "TTS") {
		t.Fatalf("err = %v", err)
	}
	ln, err := net.Listen("tcp", free)
	if err != nil {
		t.Fatalf("%s still bound after the failure: %v", free, err)
	}
	ln.Close()

	cfg.TTS.URL = "https://" + free
	if err := devcmd.FakeModels(t.Context(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Errorf("https URL: err = %v", err)
	}
}

// tone is d of a 220 Hz tone at rate, about -13 dBFS: speech to the fake.
func tone(d time.Duration, rate int) []int16 {
	out := make([]int16, int(d*time.Duration(rate)/time.Second))
	for i := range out {
		out[i] = int16(10000 * math.Sin(2*math.Pi*220*float64(i)/float64(rate)))
	}
	return out
}

func dot(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/services/memory/internal/models"
)

func TestEmbedder(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		dims     int
		setup    func(*fakeopenai.Server)
		wantErr  error
		attempts int
	}{
		{"ok", 1024, func(*fakeopenai.Server) {}, nil, 1},
		{"5xx twice then ok", 1024, func(s *fakeopenai.Server) { s.FailNext(2, 503) }, nil, 3},
		{"429 is retried", 1024, func(s *fakeopenai.Server) { s.FailNext(1, 429) }, nil, 2},
		{"5xx three times", 1024, func(s *fakeopenai.Server) { s.FailNext(3, 500) }, models.ErrUnavailable, 3},
		{"connection dropped", 1024, func(s *fakeopenai.Server) { s.SetFault(fakeopenai.Fault{Down: true}) }, models.ErrUnavailable, 3},
		{"400 is not retried", 1024, func(s *fakeopenai.Server) { s.FailNext(1, 400) }, models.ErrRejected, 1},
		{"wrong size", 768, func(*fakeopenai.Server) {}, models.ErrDimensions, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ai := fakeopenai.New(t, fakeopenai.WithAPIKey("sk-test"), fakeopenai.WithDims(c.dims))
			c.setup(ai)
			e := models.NewEmbedder(ai.URL(), "sk-test", "bge", 1024, time.Second)
			defer e.Close()
			vecs, err := e.Embed(ctx, "hello world", "goodbye")
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			reqs := ai.EmbeddingRequests()
			if len(reqs) != c.attempts {
				t.Fatalf("%d requests, want %d", len(reqs), c.attempts)
			}
			if reqs[0].Model != "bge" || !slices.Equal(reqs[0].Input, []string{"hello world", "goodbye"}) || reqs[0].Dimensions != 0 {
				t.Fatalf("request = %+v", reqs[0])
			}
			if err == nil {
				if len(vecs) != 2 || !slices.Equal(vecs[0], fakeopenai.Embed("hello world", 1024)) || !slices.Equal(vecs[1], fakeopenai.Embed("goodbye", 1024)) {
					t.Fatal("vectors are not the backend's, in order")
				}
			}
			if errors.Is(err, models.ErrDimensions) && !strings.Contains(err.Error(), "768 dimensions") {
				t.Fatalf("size error does not say the size: %v", err)
			}
		})
	}
}

func TestEmbedderTimeout(t *testing.T) {
	ai := fakeopenai.New(t)
	ai.SetFault(fakeopenai.Fault{Hang: true})
	e := models.NewEmbedder(ai.URL(), "", "bge", 1024, 50*time.Millisecond)
	defer e.Close()
	start := time.Now()
	_, err := e.Embed(context.Background(), "x")
	if !errors.Is(err, models.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s with a 50ms timeout", d)
	}
	// The caller's deadline wins over the retries.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := e.Embed(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
}

func TestExtractor(t *testing.T) {
	ai := fakeopenai.New(t)
	ai.Enqueue(fakeopenai.Turn{Text: []string{`{"memories": [{"content": "The user has a dog named Rex.", "tags": ["Pets"], "importance": 0.6}]}`}})
	x := models.NewExtractor(ai.URL(), "", "qwen", time.Second)
	defer x.Close()
	cands, err := x.Extract(context.Background(), "", "My dog Rex is sick", "I'm sorry to hear that.")
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 1 || cands[0].Content != "The user has a dog named Rex." || !slices.Equal(cands[0].Tags, []string{"pets"}) || cands[0].Importance != 0.6 {
		t.Fatalf("candidates = %+v", cands)
	}
	req := ai.Requests()[0]
	var body struct {
		Model          string `json:"model"`
		Stream         bool   `json:"stream"`
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Strict bool            `json:"strict"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "qwen" || body.Stream || body.ResponseFormat.Type != "json_schema" || !body.ResponseFormat.JSONSchema.Strict ||
		!strings.Contains(string(body.ResponseFormat.JSONSchema.Schema), `"memories"`) {
		t.Fatalf("request = %s", req.Body)
	}
	if req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "small talk") ||
		req.LastUser() != "User: My dog Rex is sick\n\nAssistant: I'm sorry to hear that." {
		t.Fatalf("messages = %+v", req.Messages)
	}

	ai.Enqueue(fakeopenai.Turn{Text: []string{`I think the user likes dogs`}})
	if _, err := x.Extract(context.Background(), "", "a", "b"); !errors.Is(err, models.ErrMalformed) {
		t.Fatalf("prose answer: %v, want malformed", err)
	}
}

func TestParseCandidates(t *testing.T) {
	long := strings.Repeat("x", models.MaxContent+50)
	for _, c := range []struct {
		name    string
		in      string
		want    []models.Candidate
		wantErr bool
	}{
		{"empty list", `{"memories": []}`, nil, false},
		{"one", `{"memories": [{"content": " The user  likes tea. ", "tags": ["Drinks", "drinks", " tea "], "importance": 0.4}]}`,
			[]models.Candidate{{Content: "The user likes tea.", Tags: []string{"drinks", "tea"}, Importance: 0.4}}, false},
		{"code fence", "```json\n{\"memories\": [{\"content\": \"a\", \"tags\": [], \"importance\": 1}]}\n```",
			[]models.Candidate{{Content: "a", Tags: []string{}, Importance: 1}}, false},
		{"importance clamped, empty content dropped", `{"memories": [{"content": "a", "tags": null, "importance": 7}, {"content": "  ", "tags": [], "importance": 0.5}, {"content": "b", "importance": -1}]}`,
			[]models.Candidate{{Content: "a", Tags: []string{}, Importance: 1}, {Content: "b", Tags: []string{}, Importance: 0}}, false},
		{"long content truncated", `{"memories": [{"content": "` + long + `", "tags": [], "importance": 0.5}]}`,
			[]models.Candidate{{Content: long[:models.MaxContent], Tags: []string{}, Importance: 0.5}}, false},
		{"at most five", `{"memories": [` + strings.Repeat(`{"content": "a", "tags": [], "importance": 0.5},`, 7) + `{"content": "a", "tags": [], "importance": 0.5}]}`,
			slices.Repeat([]models.Candidate{{Content: "a", Tags: []string{}, Importance: 0.5}}, models.MaxCandidates), false},
		{"prose", `Here you go: nothing.`, nil, true},
		{"truncated JSON", `{"memories": [{"content": "a"`, nil, true},
		{"no memories key", `{"facts": []}`, nil, true},
		{"wrong type", `{"memories": "none"}`, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := models.ParseCandidates(c.in)
			if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, models.ErrMalformed)) {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			for i := range got {
				if got[i].Content != c.want[i].Content || got[i].Importance != c.want[i].Importance || !slices.Equal(got[i].Tags, c.want[i].Tags) {
					t.Fatalf("got %+v, want %+v", got, c.want)
				}
			}
		})
	}
}

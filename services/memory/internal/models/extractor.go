package models

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/clip"
	openai "github.com/sashabaranov/go-openai"
)

// Candidate is one memory the LLM proposes to keep.
type Candidate struct {
	Content    string   `json:"content"`
	Tags       []string `json:"tags"`
	Importance float64  `json:"importance"`
}

// Limits on what an extraction may yield; the schema asks for them and
// Extract enforces them, since not every server honours a schema strictly.
const (
	MaxCandidates = 5
	MaxContent    = 500 // runes
	maxTags       = 5
	maxTag        = 32 // runes
)

// ExtractionPrompt is the built-in system prompt of an extraction: the
// seed of the memory_extraction prompt component.
const ExtractionPrompt = `You maintain the long-term memory of a personal assistant. You are shown one exchange: the user's message and the assistant's answer.

Extract the durable facts about the user that are worth remembering in future conversations: stable preferences and dislikes, personal details (name, family, pets, home, work, health, diet), ongoing projects, plans with a date, habits, and anything the user explicitly asks to remember.

Rules:
- Write each memory as one short standalone sentence about the user, in the user's language (for example "The user is allergic to peanuts.").
- Only facts the user stated or clearly confirmed; never the assistant's suggestions, general knowledge, or the question itself.
- Nothing for small talk, greetings, thanks, one-off requests or temporary states. Most exchanges contain nothing worth remembering: then answer {"memories": []}.
- importance is 0 to 1: 1 when the user asked to remember it or it concerns health or safety, about 0.5 for ordinary preferences.
- tags: one to three short lower-case words naming the topic.
- At most 5 memories.`

// extractionSchema is the JSON schema of the answer.
var extractionSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "memories": {
      "type": "array",
      "maxItems": 5,
      "items": {
        "type": "object",
        "properties": {
          "content": {"type": "string", "minLength": 1, "maxLength": 500},
          "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
          "importance": {"type": "number", "minimum": 0, "maximum": 1}
        },
        "required": ["content", "tags", "importance"],
        "additionalProperties": false
      }
    }
  },
  "required": ["memories"],
  "additionalProperties": false
}`)

// Extractor asks a chat model which facts of a turn are worth remembering.
type Extractor struct {
	api   *openai.Client
	conns *http.Transport
	model string
	retry retryPolicy
}

// NewExtractor returns an extractor for model at baseURL (ending in /v1).
func NewExtractor(baseURL, apiKey, model string, timeout time.Duration) *Extractor {
	api, conns := newClient(baseURL, apiKey)
	return &Extractor{
		api:   api,
		conns: conns,
		model: model,
		retry: retryPolicy{attempts: 2, backoff: 500 * time.Millisecond, timeout: timeout},
	}
}

// Model is the chat model extraction asks.
func (x *Extractor) Model() string { return x.model }

// Extract returns the memories worth keeping from one exchange, possibly
// none, asked with system prompt system ("": ExtractionPrompt). A reply
// that is not the schema's JSON is ErrMalformed.
func (x *Extractor) Extract(ctx context.Context, system, userText, answerText string) ([]Candidate, error) {
	if system == "" {
		system = ExtractionPrompt
	}
	req := openai.ChatCompletionRequest{
		Model: x.model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: "User: " + userText + "\n\nAssistant: " + answerText},
		},
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   "memories",
				Schema: extractionSchema,
				Strict: true,
			},
		},
		// Greedy decoding; go-openai omits a zero temperature.
		Temperature: math.SmallestNonzeroFloat32,
		MaxTokens:   600, //nolint:staticcheck // SA1019: max_tokens, which every OpenAI-compatible server (vLLM, llama.cpp, fakeopenai) reads; max_completion_tokens is OpenAI's newer name, not read by all
	}
	var resp openai.ChatCompletionResponse
	err := x.retry.do(ctx, "extraction", func(ctx context.Context) error {
		var err error
		resp, err = x.api.CreateChatCompletion(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.Choices) == 0 {
		return nil, fmt.Errorf("extraction: %w: no choices", ErrMalformed)
	}
	return ParseCandidates(resp.Choices[0].Message.Content)
}

// ParseCandidates reads the model's JSON answer, tolerating a Markdown code
// fence around it, and keeps the usable candidates: trimmed, non-empty,
// capped in length and number, importance clamped to 0..1, tags lower-cased
// and de-duplicated.
func ParseCandidates(content string) ([]Candidate, error) {
	s := strings.TrimSpace(content)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
	}
	var out struct {
		Memories *[]Candidate `json:"memories"`
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("extraction: %w: %w", ErrMalformed, err)
	}
	if out.Memories == nil {
		return nil, fmt.Errorf("extraction: %w: no \"memories\" array", ErrMalformed)
	}
	var cands []Candidate
	for _, c := range *out.Memories {
		c.Content = strings.TrimSpace(clip.Runes(strings.Join(strings.Fields(c.Content), " "), MaxContent))
		if c.Content == "" || math.IsNaN(c.Importance) {
			continue
		}
		c.Importance = min(max(c.Importance, 0), 1)
		c.Tags = NormalizeTags(c.Tags)
		cands = append(cands, c)
		if len(cands) == MaxCandidates {
			break
		}
	}
	return cands, nil
}

// NormalizeTags lower-cases, trims, caps and de-duplicates tags, keeping
// their order; never nil.
func NormalizeTags(tags []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, t := range tags {
		t = strings.TrimSpace(clip.Runes(strings.ToLower(strings.TrimSpace(t)), maxTag))
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
		if len(out) == maxTags {
			break
		}
	}
	return out
}

// Close drops idle connections to the backend.
func (x *Extractor) Close() { x.conns.CloseIdleConnections() }

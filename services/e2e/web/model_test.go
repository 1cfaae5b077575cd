package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// What the browser specs (services/gateway/web/e2e) say, and what the fake
// model answers: each phrase picks one scripted answer. Keep this table and
// e2e/fixtures.ts in step.
const (
	markdownPhrase  = "Show me some Markdown"
	htmlPhrase      = "Show me some HTML"
	slowMarker      = "slowly" // every chunk of the answer waits chunkPace
	shortStory      = "Tell me a short story slowly"
	longStory       = "Tell me a long story slowly"
	toolPhrase      = "six times seven"
	thinkPhrase     = "Think it over"
	failPhrase      = "Fail once"
	everythingQuery = "Zorblat everything"
	// continueInstruction is the llm's request to continue an answer
	// (services/llm/internal/turn/context.go).
	continueInstruction = "Continue your previous answer"
)

// chunkPace is the wait before each streamed chunk of a slow answer.
const chunkPace = 200 * time.Millisecond

const markdownAnswer = "Here is a summary.\n\n```go\nfmt.Println(\"hello\")\n```\n\nThe fruit:\n\n- apples\n- pears\n\n" +
	"| fruit | colour |\n|---|---|\n| apple | red |\n| pear | green |\n\nThat is all."

const htmlAnswer = `Careful: <img src=x onerror="window.__xss=1"> is an image tag and [this link](javascript:window.__xss=1) is a script link.`

// story is n numbered sentences, one delta each.
func story(n int) fakeopenai.Turn {
	var t fakeopenai.Turn
	for i := 1; i <= n; i++ {
		sep := " "
		if i == 1 {
			sep = ""
		}
		t.Text = append(t.Text, fmt.Sprintf("%sSentence %d of the story.", sep, i))
	}
	return t
}

// newModel is the llm's fake model server: fakeopenai scripted for the
// specs, and answers paced chunk by chunk when the user's message asks for
// it slowly.
func newModel() http.Handler {
	h := fakeopenai.NewHandler(fakeopenai.WithModels(chatModel, ttsModel), fakeopenai.WithResponder(numbered()))
	user := fakeopenai.LastUserContains
	repeat := func(m fakeopenai.Matcher, turns ...fakeopenai.Turn) {
		h.AddScript(fakeopenai.Script{Match: m, Turns: turns, Repeat: true})
	}
	repeat(user(markdownPhrase), fakeopenai.Text(markdownAnswer))
	repeat(user(htmlPhrase), fakeopenai.Text(htmlAnswer))
	repeat(user(shortStory), story(6))
	repeat(user(longStory), story(30))
	calc := fakeopenai.ToolCall{Name: "calculator", Arguments: `{"expression":"6*7"}`}
	repeat(fakeopenai.All(user(toolPhrase), fakeopenai.Not(fakeopenai.HasToolResult())), fakeopenai.Calls(calc))
	repeat(fakeopenai.All(user(toolPhrase), fakeopenai.HasToolResult()), fakeopenai.Text("Six times seven is 42."))
	repeat(user(thinkPhrase), fakeopenai.Turn{
		Reasoning: []string{"First, the question asks for a decision.\n\n", "Second, the facts favour yes."},
		Text:      fakeopenai.Words("After thinking it over, the answer is yes."),
	})
	// Every part at once: reasoning, a tool call, then the answer (the
	// memories come from the memory service).
	repeat(fakeopenai.All(user(everythingQuery), fakeopenai.Not(fakeopenai.HasToolResult())), fakeopenai.Turn{
		Reasoning: []string{"I should compute it with the calculator."},
		ToolCalls: []fakeopenai.ToolCall{calc},
	})
	repeat(fakeopenai.All(user(everythingQuery), fakeopenai.HasToolResult()), fakeopenai.Text("Zorblat gets 42."))
	// The first request fails as a dead backend would, the retry works.
	repeat(user(failPhrase), fakeopenai.Turn{Status: http.StatusServiceUnavailable}, fakeopenai.Text("It works now."))
	repeat(user(continueInstruction), fakeopenai.Text("And that is the rest of it."))
	// The voice specs (voice_test.go).
	repeat(user(voiceQuestion), fakeopenai.Text(strings.Join(voiceAnswer, " ")))
	repeat(user(voiceInterrupt), fakeopenai.Text(voiceJoke))
	repeat(user(voiceBenchPhrase), fakeopenai.Text(voiceBenchAnswer))
	return paced{h}
}

// numbered answers anything unscripted with "This is answer N to your
// message.", N counting the requests with the same last user message: a
// regenerated answer differs from the one before.
func numbered() func(fakeopenai.Request) fakeopenai.Turn {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(r fakeopenai.Request) fakeopenai.Turn {
		mu.Lock()
		defer mu.Unlock()
		seen[r.LastUser()]++
		return fakeopenai.Text(fmt.Sprintf("This is answer %d to your message.", seen[r.LastUser()]))
	}
}

// paced slows the stream of chat requests whose last user message contains
// slowMarker: each write of the response waits chunkPace, so the answer
// arrives sentence by sentence while the browser watches (or stops it, or
// loses its connection).
type paced struct{ next http.Handler }

func (p paced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(lastUser(body), slowMarker) {
			w = &slowWriter{ResponseWriter: w, r: r}
		}
	}
	p.next.ServeHTTP(w, r)
}

func lastUser(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return string(req.Messages[i].Content)
		}
	}
	return ""
}

type slowWriter struct {
	http.ResponseWriter
	r *http.Request
}

func (s *slowWriter) Write(b []byte) (int, error) {
	t := time.NewTimer(chunkPace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.r.Context().Done(): // the llm stopped the answer
		return 0, s.r.Context().Err()
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush and hijack the real writer.
func (s *slowWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

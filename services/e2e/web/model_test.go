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
	// gardenPhrase starts optimize.spec.ts's questions: answered at length
	// unless the system prompt asks for one sentence (what a run finds).
	gardenPhrase = "About my garden"
	// continueInstruction is the llm's request to continue an answer
	// (services/llm/internal/turn/context.go).
	continueInstruction = "Continue your previous answer"
	// timers.spec.ts: a timer due in a few seconds, a reminder in an hour.
	timerPhrase    = "Set a tea timer"
	reminderPhrase = "Remind me to water the plants"
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
	// Improve Alicia (optimize.spec.ts): the assistant follows its system
	// prompt when it asks for one sentence.
	repeat(fakeopenai.All(user(gardenPhrase), systemContains(briefInstruction)), fakeopenai.Text(briefAnswer))
	repeat(user(gardenPhrase), fakeopenai.Text(longAnswer))
	// Timers (timers.spec.ts): the tools of the llm's real registry.
	setTimer := fakeopenai.ToolCall{Name: "set_timer", Arguments: `{"duration":"PT4S","label":"tea"}`}
	repeat(fakeopenai.All(user(timerPhrase), fakeopenai.Not(fakeopenai.HasToolResult())), fakeopenai.Calls(setTimer))
	repeat(fakeopenai.All(user(timerPhrase), fakeopenai.HasToolResult()), fakeopenai.Text("Your tea timer is set for four seconds."))
	setReminder := fakeopenai.ToolCall{Name: "set_reminder", Arguments: `{"when":"in 1 hour","label":"water the plants"}`}
	repeat(fakeopenai.All(user(reminderPhrase), fakeopenai.Not(fakeopenai.HasToolResult())), fakeopenai.Calls(setReminder))
	repeat(fakeopenai.All(user(reminderPhrase), fakeopenai.HasToolResult()), fakeopenai.Text("I will remind you in an hour."))
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

// What the critic proposes and the assistant then follows.
const (
	briefInstruction = "Answer in one sentence."
	briefAnswer      = "It is done."
	longAnswer       = "Well, let me tell you everything about that at length, since there is a lot to say about it and I like to talk."
	tooLong          = "The answer is too long: it rambles beyond the question."
)

// systemContains matches a request whose system prompt contains sub.
func systemContains(sub string) fakeopenai.Matcher {
	return func(r fakeopenai.Request) bool {
		return len(r.Messages) > 0 && r.Messages[0].Role == "system" && strings.Contains(r.Messages[0].Content, sub)
	}
}

// newCritic answers the llm's judges and the optimiser's reflection model,
// each following its prompt: both judges find an answer of more than 12
// words too long (relevancy 0.3, else 0.9; never perfect, so a run spends
// its budget), the turn judge with exactly its keys and the optimiser's
// with userFeedback -1 (no remark); the reflection model adds
// briefInstruction to the component when its feedback says too long.
func newCritic() func(fakeopenai.Request) fakeopenai.Turn {
	verdict := func(answer string, optimiser bool) fakeopenai.Turn {
		relevancy, why := 0.9, "The answer is short and to the point."
		if len(strings.Fields(answer)) > 12 {
			relevancy, why = 0.3, tooLong
		}
		v := map[string]any{"correctness": 0.9, "faithfulness": 0.8, "relevancy": relevancy, "rationale": why}
		if optimiser {
			v["userFeedback"] = -1
		}
		b, _ := json.Marshal(v)
		return fakeopenai.Text(string(b))
	}
	return func(r fakeopenai.Request) fakeopenai.Turn {
		system := ""
		if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
			system = r.Messages[0].Content
		}
		switch {
		case strings.HasPrefix(system, "You judge"):
			var in struct {
				Answer string `json:"answer"`
			}
			_ = json.Unmarshal([]byte(r.LastUser()), &in)
			return verdict(in.Answer, true)
		case strings.HasPrefix(r.LastUser(), "I provided an assistant"):
			_, rest, _ := strings.Cut(r.LastUser(), "```\n")
			current, _, _ := strings.Cut(rest, "\n```")
			if strings.Contains(r.LastUser(), "too long") && !strings.Contains(current, briefInstruction) {
				return fakeopenai.Text("```\n" + current + " " + briefInstruction + "\n```")
			}
			return fakeopenai.Text("```\n" + current + " Be kind.\n```")
		case system != "":
			// The turn judge: the answer comes last, after "Answer:".
			_, answer, _ := strings.Cut(r.LastUser(), "\n\nAnswer:\n")
			return verdict(answer, false)
		}
		return fakeopenai.Text("{}")
	}
}

package judge

import (
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
)

// Prompt is a judge request: instructions and the turn to judge.
type Prompt struct{ System, User string }

// Bounds of what a judge request carries, in runes.
const (
	maxQuestion   = 4000
	maxAnswer     = 8000
	maxToolResult = 2000
	maxMemory     = 500
	maxTools      = 10
	maxMemories   = 10
)

// SystemPrompt tells the judge model what to score and how to answer.
const SystemPrompt = `You are a strict evaluator of a voice assistant's answers. You are given the user's question, the tool results and memories the assistant had, and its answer. Score the answer, each score a number from 0 to 1:
- correctness: whether what the answer states is right.
- faithfulness: whether the answer keeps to the tool results and memories given; 1 when it used none and claims nothing beyond the conversation; 0 when it contradicts them or invents what they do not say.
- relevancy: whether the answer addresses what the user asked.
Reply with one JSON object and nothing else, exactly these keys: {"correctness": <number>, "faithfulness": <number>, "relevancy": <number>, "rationale": "<one sentence>"}`

// PromptFor is the judge request for turn t.
func PromptFor(t store.JudgedTurn) Prompt {
	var b strings.Builder
	b.WriteString("Question:\n")
	b.WriteString(clip.Runes(t.Question, maxQuestion))
	b.WriteString("\n\nTool results:\n")
	if len(t.Tools) == 0 {
		b.WriteString("(none)\n")
	}
	for i, u := range t.Tools {
		if i == maxTools {
			fmt.Fprintf(&b, "(%d more not shown)\n", len(t.Tools)-maxTools)
			break
		}
		fmt.Fprintf(&b, "%d. %s(%s) -> ", i+1, u.Name, clip.Runes(u.Arguments, maxToolResult))
		if u.Status == "success" {
			b.WriteString(clip.Runes(u.Result, maxToolResult))
		} else {
			fmt.Fprintf(&b, "%s error %s: %s", u.Status, u.ErrorCode, clip.Runes(u.ErrorMessage, maxToolResult))
		}
		b.WriteByte('\n')
	}
	b.WriteString("\nMemories:\n")
	if len(t.Memories) == 0 {
		b.WriteString("(none)\n")
	}
	for i, m := range t.Memories {
		if i == maxMemories {
			break
		}
		fmt.Fprintf(&b, "- %s\n", clip.Runes(m, maxMemory))
	}
	b.WriteString("\nAnswer:\n")
	b.WriteString(clip.Runes(t.Answer, maxAnswer))
	return Prompt{System: SystemPrompt, User: b.String()}
}

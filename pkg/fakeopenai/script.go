package fakeopenai

import (
	"strings"
	"unicode"
)

// Finish reasons a Turn can end with.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// Turn is one scripted assistant answer. Streamed, it yields the Reasoning
// deltas, then the Text deltas, then the tool calls; unstreamed, the deltas
// are joined.
type Turn struct {
	Reasoning []string // reasoning_content deltas
	Text      []string // content deltas
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise.
	FinishReason string
	// Usage defaults to word counts of the prompt and of the answer.
	Usage *Usage
	// Status, when non-zero, answers this request with that HTTP error
	// instead of a completion.
	Status int
}

// ToolCall is a function call, scripted in a Turn or recorded from a message.
type ToolCall struct {
	ID        string // generated when empty
	Name      string
	Arguments string // JSON; streamed in pieces of ArgumentPiece runes
}

// ArgumentPiece is how many runes of a tool call's arguments go in one
// streamed delta.
const ArgumentPiece = 8

// Usage is the token accounting reported with an answer.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// Text is a turn answering s, streamed word by word.
func Text(s string) Turn { return Turn{Text: Words(s)} }

// Calls is a turn that asks for the given tool calls.
func Calls(calls ...ToolCall) Turn { return Turn{ToolCalls: calls} }

// Words splits s into deltas the way a tokenizer roughly would: each word
// carries the space before it, so the deltas concatenate back to s.
func Words(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if unicode.IsSpace(r) && i > start && !isAllSpace(s[start:i]) {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isAllSpace(s string) bool { return strings.TrimSpace(s) == "" }

// Matcher decides whether a script answers a request.
type Matcher func(Request) bool

// LastUserContains matches when the last user message contains sub.
func LastUserContains(sub string) Matcher {
	return func(r Request) bool { return strings.Contains(r.LastUser(), sub) }
}

// HasTools matches requests that offer tools.
func HasTools() Matcher { return func(r Request) bool { return len(r.Tools) > 0 } }

// HasToolResult matches requests carrying a tool result message.
func HasToolResult() Matcher {
	return func(r Request) bool {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				return true
			}
		}
		return false
	}
}

// LastRole matches when the last message has the given role.
func LastRole(role string) Matcher {
	return func(r Request) bool {
		return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == role
	}
}

// All matches when every matcher does.
func All(ms ...Matcher) Matcher {
	return func(r Request) bool {
		for _, m := range ms {
			if !m(r) {
				return false
			}
		}
		return true
	}
}

// Not inverts a matcher.
func Not(m Matcher) Matcher { return func(r Request) bool { return !m(r) } }

// Script answers the requests Match accepts, one turn per request, in order.
// Scripts with a Match are tried before scripts without one, each group in
// the order added, so specific answers win over the in-order queue.
type Script struct {
	Match Matcher // nil: any request
	Turns []Turn
	// Repeat starts again after the last turn instead of retiring the script.
	Repeat bool
}

type scriptState struct {
	Script
	next int
}

func (s *scriptState) left() int {
	if s.Repeat && len(s.Turns) > 0 {
		return len(s.Turns)
	}
	return len(s.Turns) - s.next
}

func (s *scriptState) take() Turn {
	t := s.Turns[s.next]
	s.next++
	if s.Repeat && s.next == len(s.Turns) {
		s.next = 0
	}
	return t
}

// Package optimize runs GEPA (internal/gepa) on Alicia's own answers: its
// examples are stored turns — the question, the branch's history before
// it, the memories the answer used, the tool calls it made with their
// recorded results, the answer given and what the person and the judge
// said about it — and a candidate is a set of prompt component texts
// (system, voice_style, tool:<name>).
//
// Replaying a turn: the candidate's texts build the request as the llm's
// turn does (system prompt, then voice style when the answer was spoken,
// then the memories; the history; the question; the tools with the
// candidate's descriptions) and the chat model answers. Tools are never
// re-run: a call whose tool and arguments match a recorded call gets that
// call's recorded result, one whose tool matches a recorded call with
// other arguments gets that call's result too (the world it ran in is
// gone), and any other call gets "no recorded result" — so a replay is
// deterministic wherever the model is, and never has side effects
// (sending, storing, fetching).
//
// Scoring: the Judge scores the replayed answer's correctness,
// faithfulness (to the recorded tool results and memories) and relevancy,
// and, when the person said something about the original answer (a vote
// reason, a note), whether the new answer does what they asked
// (userFeedback); brevity is measured on spoken answers. The outcome's
// feedback for reflection is the judge's rationale and the person's words.
package optimize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
)

// Component names a candidate may hold.
const (
	ComponentSystem     = "system"
	ComponentVoiceStyle = "voice_style"
	// ToolPrefix + a tool's name is its description's component.
	ToolPrefix = "tool:"
)

// Dimensions an outcome is scored on.
const (
	DimCorrectness  = "correctness"
	DimFaithfulness = "faithfulness"
	DimRelevancy    = "relevancy"
	DimUserFeedback = "userFeedback"
	DimBrevity      = "brevity"
)

// Turn is a stored turn, as the optimiser replays it.
type Turn struct {
	// MessageID is the answer's id (am_…); UserID whose conversation it is.
	MessageID, UserID string
	// History is the branch before the question, oldest first.
	History []Message
	// Question is what the person asked.
	Question string
	// Memories are the memories the answer used.
	Memories []string
	// Tools are the calls the answer made, with their recorded results.
	Tools []ToolCall
	// Answer is what Alicia answered; Spoken whether it was heard.
	Answer string
	Spoken bool
	// Feedback is what the person said about the answer (vote reasons,
	// notes); Vote +1, -1 or 0.
	Feedback []string
	Vote     int
}

// Message is one message of the history.
type Message struct{ Role, Content string }

// ToolCall is a recorded tool call.
type ToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Result    string `json:"result"`
}

// ToolDef is a tool the model may call, its description the seed's.
type ToolDef struct {
	Name, Description string
	Parameters        json.RawMessage
}

// Verdict is the judge's scores of one answer, each in [0, 1].
type Verdict struct {
	Correctness, Faithfulness, Relevancy float64
	// UserFeedback: whether the answer does what the person asked of the
	// original (-1: they said nothing).
	UserFeedback float64
	Rationale    string
}

// Judge scores an answer to a turn.
type Judge interface {
	Judge(ctx context.Context, t Turn, answer string, calls []ToolCall) (Verdict, error)
}

// maxBrevityWords: a spoken answer of at most this many words is brief.
const maxBrevityWords = 40

// Adapter replays turns with a candidate's texts (gepa.Adapter[Turn]).
type Adapter struct {
	Chat  *openai.Client
	Model string
	Judge Judge
	// Tools are the tools offered, with their seed descriptions.
	Tools []ToolDef
	// MaxToolRounds bounds the model's tool rounds per turn (default 3).
	MaxToolRounds int

	outs *outputs // while a Runner runs: every answer, for the elites' examples
}

var _ gepa.Adapter[Turn] = (*Adapter)(nil)

// trace is what an outcome carries for reflection.
type trace struct {
	Question string     `json:"question"`
	Memories []string   `json:"memories,omitempty"`
	Spoken   bool       `json:"spoken,omitempty"`
	Calls    []ToolCall `json:"calls,omitempty"`
}

// Evaluate replays every turn of batch with candidate c.
func (a *Adapter) Evaluate(ctx context.Context, batch []Turn, c gepa.Candidate, captureTraces bool) (gepa.EvalBatch, error) {
	out := gepa.EvalBatch{Outcomes: make([]gepa.Outcome, 0, len(batch))}
	for _, t := range batch {
		answer, calls, err := a.replay(ctx, t, c)
		if err != nil {
			return gepa.EvalBatch{}, fmt.Errorf("optimize: replay %s: %w", t.MessageID, err)
		}
		a.keepOutput(c, t.MessageID, answer)
		v, err := a.Judge.Judge(ctx, t, answer, calls)
		if err != nil {
			return gepa.EvalBatch{}, fmt.Errorf("optimize: judge %s: %w", t.MessageID, err)
		}
		o := gepa.Outcome{Output: answer, Scores: map[string]float64{
			DimCorrectness: v.Correctness, DimFaithfulness: v.Faithfulness, DimRelevancy: v.Relevancy}}
		if v.UserFeedback >= 0 && len(t.Feedback) > 0 {
			o.Scores[DimUserFeedback] = v.UserFeedback
		}
		if t.Spoken {
			o.Scores[DimBrevity] = brevity(answer)
		}
		var sum float64
		for _, s := range o.Scores {
			sum += s
		}
		o.Score = sum / float64(len(o.Scores))
		o.Feedback = feedbackText(t, v, o.Scores)
		if captureTraces {
			b, _ := json.Marshal(trace{Question: t.Question, Memories: t.Memories, Spoken: t.Spoken, Calls: calls})
			o.Trace = string(b)
		}
		out.Outcomes = append(out.Outcomes, o)
	}
	return out, nil
}

// MakeReflectiveDataset gives the reflection model, per component, what
// each turn asked, had and got, and what was said about the answer.
func (a *Adapter) MakeReflectiveDataset(_ gepa.Candidate, eval gepa.EvalBatch, components []string) map[string][]gepa.ReflectiveRecord {
	out := map[string][]gepa.ReflectiveRecord{}
	for _, comp := range components {
		for _, o := range eval.Outcomes {
			var tr trace
			_ = json.Unmarshal([]byte(o.Trace), &tr)
			var in strings.Builder
			fmt.Fprintf(&in, "Question: %s", tr.Question)
			if tr.Spoken {
				in.WriteString("\n(The answer was spoken aloud.)")
			}
			for _, m := range tr.Memories {
				fmt.Fprintf(&in, "\nMemory: %s", m)
			}
			for _, c := range tr.Calls {
				if strings.TrimPrefix(comp, ToolPrefix) == c.Name || !strings.HasPrefix(comp, ToolPrefix) {
					fmt.Fprintf(&in, "\nTool call %s(%s) → %s", c.Name, c.Arguments, c.Result)
				}
			}
			out[comp] = append(out[comp], gepa.ReflectiveRecord{Inputs: in.String(), Output: o.Output, Feedback: o.Feedback, Score: o.Score})
		}
	}
	return out
}

// feedbackText is the judge's rationale, the person's words and what the
// scores say.
func feedbackText(t Turn, v Verdict, scores map[string]float64) string {
	var b strings.Builder
	if v.Rationale != "" {
		fmt.Fprintf(&b, "Judge: %s\n", v.Rationale)
	}
	for _, f := range t.Feedback {
		fmt.Fprintf(&b, "The person said about the original answer: %s\n", f)
	}
	switch {
	case t.Vote > 0:
		b.WriteString("The person liked the original answer.\n")
	case t.Vote < 0:
		b.WriteString("The person disliked the original answer.\n")
	}
	if s, ok := scores[DimBrevity]; ok && s < 1 {
		b.WriteString("The answer was spoken aloud and too long to follow by ear.\n")
	}
	return strings.TrimSpace(b.String())
}

// brevity is 1 for a spoken answer of at most maxBrevityWords, less as it
// grows.
func brevity(answer string) float64 {
	n := len(strings.Fields(answer))
	if n <= maxBrevityWords {
		return 1
	}
	return float64(maxBrevityWords) / float64(n)
}

// SystemPrompt is the system message a candidate gives a turn: the system
// text, the voice style when the answer is spoken, the memories.
func SystemPrompt(c gepa.Candidate, spoken bool, memories []string) string {
	var b strings.Builder
	b.WriteString(c[ComponentSystem])
	if spoken && c[ComponentVoiceStyle] != "" {
		b.WriteString("\n\n")
		b.WriteString(c[ComponentVoiceStyle])
	}
	if len(memories) > 0 {
		b.WriteString("\n\nWhat you remember about the person:")
		for _, m := range memories {
			b.WriteString("\n- ")
			b.WriteString(m)
		}
	}
	return b.String()
}

// replay runs the turn with c: the answer and the calls made, each with
// the result it was given.
func (a *Adapter) replay(ctx context.Context, t Turn, c gepa.Candidate) (string, []ToolCall, error) {
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: SystemPrompt(c, t.Spoken, t.Memories)}}
	for _, m := range t.History {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
	}
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: t.Question})
	var tools []openai.Tool
	for _, d := range a.Tools {
		desc := d.Description
		if v, ok := c[ToolPrefix+d.Name]; ok {
			desc = v
		}
		params := d.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: d.Name, Description: desc, Parameters: params}})
	}
	rounds := a.MaxToolRounds
	if rounds <= 0 {
		rounds = 3
	}
	var calls []ToolCall
	for round := 0; ; round++ {
		req := openai.ChatCompletionRequest{Model: a.Model, Messages: msgs, Temperature: 0}
		if round < rounds {
			req.Tools = tools
		}
		resp, err := a.Chat.CreateChatCompletion(ctx, req)
		if err != nil {
			return "", nil, err
		}
		if len(resp.Choices) == 0 {
			return "", nil, errors.New("the model returned no choice")
		}
		m := resp.Choices[0].Message
		if len(m.ToolCalls) == 0 || round >= rounds {
			return strings.TrimSpace(m.Content), calls, nil
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: m.Content, ToolCalls: m.ToolCalls})
		for _, tc := range m.ToolCalls {
			res := recorded(t.Tools, tc.Function.Name, tc.Function.Arguments)
			calls = append(calls, ToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments, Result: res})
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: res})
		}
	}
}

// NoRecord is the result of a call that has no recorded counterpart.
const NoRecord = `{"error":"no recorded result for this call: tools are replayed, not run, while optimising"}`

// recorded is the recorded result of the call to name with args: the same
// call's, else the first call's of that tool, else NoRecord.
func recorded(calls []ToolCall, name, args string) string {
	for _, c := range calls {
		if c.Name == name && sameJSON(c.Arguments, args) {
			return c.Result
		}
	}
	for _, c := range calls {
		if c.Name == name {
			return c.Result
		}
	}
	return NoRecord
}

// sameJSON compares two JSON texts by value (formatting and key order apart).
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

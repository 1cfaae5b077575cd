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

// judgeSystem is the judge's instructions for a replayed answer.
const judgeSystem = `You judge an AI voice assistant's answer. You are given the person's question, what the assistant remembered about them, the tool calls it made with their results, what the person said about an earlier answer to the same question (if anything), and the answer to judge.
Score each in [0, 1]:
- correctness: what the answer states is right, as far as the question, the tool results and the memories show;
- faithfulness: the answer keeps to the tool results and memories and invents nothing beyond them (1 when it claims nothing beyond the conversation);
- relevancy: the answer addresses what was asked;
- userFeedback: the answer does what the person asked for in their remarks about the earlier answer (-1 when they made none).
Reply with one JSON object only: {"correctness": n, "faithfulness": n, "relevancy": n, "userFeedback": n, "rationale": "one sentence"}.`

// ModelJudge is a Judge that asks a chat model (OpenAI-compatible).
type ModelJudge struct {
	Chat  *openai.Client
	Model string
}

// judgeInput is what the judge is shown, as JSON.
type judgeInput struct {
	Question      string     `json:"question"`
	Memories      []string   `json:"memories,omitempty"`
	ToolCalls     []ToolCall `json:"toolCalls,omitempty"`
	PersonSaid    []string   `json:"personSaidAboutEarlierAnswer,omitempty"`
	Spoken        bool       `json:"spokenAloud"`
	AnswerToJudge string     `json:"answer"`
}

// Judge scores answer (with the calls it made) to t.
func (j ModelJudge) Judge(ctx context.Context, t Turn, answer string, calls []ToolCall) (Verdict, error) {
	in, err := json.Marshal(judgeInput{Question: t.Question, Memories: t.Memories, ToolCalls: calls, PersonSaid: t.Feedback, Spoken: t.Spoken, AnswerToJudge: answer})
	if err != nil {
		return Verdict{}, err
	}
	var last error
	for range 2 { // a malformed reply is asked again once
		resp, err := j.Chat.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: j.Model, Temperature: 0,
			ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: judgeSystem},
				{Role: openai.ChatMessageRoleUser, Content: string(in)}}})
		if err != nil {
			return Verdict{}, err
		}
		if len(resp.Choices) == 0 {
			last = errors.New("the judge returned no choice")
			continue
		}
		v, err := parseVerdict(resp.Choices[0].Message.Content)
		if err == nil {
			return v, nil
		}
		last = err
	}
	return Verdict{}, fmt.Errorf("optimize: judge: %w", last)
}

// parseVerdict reads the judge's JSON: every score present and in [0, 1]
// (userFeedback may be -1).
func parseVerdict(s string) (Verdict, error) {
	var raw struct {
		Correctness, Faithfulness, Relevancy, UserFeedback *float64
		Rationale                                          string
	}
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "```json"), "```"), "```")
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return Verdict{}, fmt.Errorf("not a JSON verdict: %w", err)
	}
	check := func(name string, p *float64, allowNone bool) (float64, error) {
		switch {
		case p == nil && allowNone:
			return -1, nil
		case p == nil:
			return 0, fmt.Errorf("no %s", name)
		case allowNone && *p == -1:
			return -1, nil
		case *p < 0 || *p > 1:
			return 0, fmt.Errorf("%s %v outside [0, 1]", name, *p)
		}
		return *p, nil
	}
	var v Verdict
	var err error
	if v.Correctness, err = check(DimCorrectness, raw.Correctness, false); err != nil {
		return Verdict{}, err
	}
	if v.Faithfulness, err = check(DimFaithfulness, raw.Faithfulness, false); err != nil {
		return Verdict{}, err
	}
	if v.Relevancy, err = check(DimRelevancy, raw.Relevancy, false); err != nil {
		return Verdict{}, err
	}
	if v.UserFeedback, err = check(DimUserFeedback, raw.UserFeedback, true); err != nil {
		return Verdict{}, err
	}
	v.Rationale = strings.TrimSpace(raw.Rationale)
	return v, nil
}

// ModelReflector is a gepa.Reflector that asks a chat model to rewrite a
// component from the records, with the paper's meta-prompt.
type ModelReflector struct {
	Chat  *openai.Client
	Model string
}

var _ gepa.Reflector = ModelReflector{}

// Propose returns the component's new text: the text of the reply's first
// ``` block (or the whole reply without one).
func (r ModelReflector) Propose(ctx context.Context, component, current string, records []gepa.ReflectiveRecord) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "I provided an assistant with the following instructions (the %q part of its prompt) to perform a task for me:\n```\n%s\n```\n\n", component, current)
	b.WriteString("The following are examples of different task inputs provided to the assistant along with the assistant's response for each of them, and some feedback on how the assistant's response could be better:\n")
	for i, rec := range records {
		fmt.Fprintf(&b, "\n# Example %d\n## Inputs\n%s\n## Generated Outputs\n%s\n## Feedback\n%s\n(score %.2f)\n", i+1, rec.Inputs, rec.Output, rec.Feedback, rec.Score)
	}
	b.WriteString("\nYour task is to write a new instruction for the assistant.\n\n" +
		"Read the inputs carefully and identify the input format and infer detailed task description about the task I wish to solve with the assistant.\n\n" +
		"Read all the assistant responses and the corresponding feedback. Identify all niche and domain specific factual information about the task and include it in the instruction, as a lot of it may not be available to the assistant in the future. The assistant may have utilized a generalizable strategy to solve the task, if so, include that in the instruction as well.\n\n" +
		"Provide the new instructions within ``` blocks.")
	resp, err := r.Chat.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: r.Model,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: b.String()}}})
	if err != nil {
		return "", fmt.Errorf("optimize: reflect on %s: %w", component, err)
	}
	if len(resp.Choices) == 0 {
		return "", errors.New("optimize: the reflection model returned no choice")
	}
	text := between(resp.Choices[0].Message.Content)
	if text == "" {
		return "", errors.New("optimize: the reflection model proposed an empty text")
	}
	return text, nil
}

// between is the content of the first ``` block of s (its language tag
// dropped), or s trimmed when it has none.
func between(s string) string {
	_, rest, ok := strings.Cut(s, "```")
	if !ok {
		return strings.TrimSpace(s)
	}
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.ContainsAny(rest[:nl], " \t") {
		rest = rest[nl+1:] // ```text or ``` alone on its line
	}
	body, _, _ := strings.Cut(rest, "```")
	return strings.TrimSpace(body)
}

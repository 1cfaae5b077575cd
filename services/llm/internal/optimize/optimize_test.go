package optimize_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
	"github.com/alicia-voice/alicia/services/llm/internal/optimize"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The fakes behind one OpenAI-compatible server respond to what their
// prompts say, as the real models would be asked to:
//   - the assistant calls the weather tool, then answers from its result:
//     in one sentence only when its system prompt says so, with the unit
//     only when told to say units;
//   - the judge scores from checkable facts: the tool's number in the
//     answer (correctness), no other number (faithfulness), the unit when
//     the person asked for it (userFeedback);
//   - the reflection model adds the instruction its feedback points to.
func fakeModels(t *testing.T) *fakeopenai.Server {
	return fakeopenai.New(t, fakeopenai.WithResponder(func(r fakeopenai.Request) fakeopenai.Turn {
		switch {
		case len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You judge"):
			return fakeopenai.Text(judge(r.LastUser()))
		case strings.HasPrefix(r.LastUser(), "I provided an assistant"):
			return fakeopenai.Text(reflect(r.LastUser()))
		}
		return assistant(r)
	}))
}

var number = regexp.MustCompile(`\d+`)

func assistant(r fakeopenai.Request) fakeopenai.Turn {
	system := r.Messages[0].Content
	var result string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			result = m.Content
		}
	}
	if result == "" && len(r.Tools) > 0 {
		return fakeopenai.Calls(fakeopenai.ToolCall{Name: "weather", Arguments: `{"city": "Paris"}`})
	}
	n := number.FindString(result)
	unit := ""
	if strings.Contains(system, "unit") {
		unit = " Celsius"
	}
	if strings.Contains(system, "one sentence") {
		return fakeopenai.Text(fmt.Sprintf("It will be %s degrees%s.", n, unit))
	}
	return fakeopenai.Text(fmt.Sprintf("Let me check the forecast for you. The weather service says it will be %s degrees%s tomorrow. "+
		"It might be cloudy in the morning, and the wind could pick up later in the day, so take a jacket if you go out in the evening. "+
		"Have a lovely day, and let me know if you need anything else at all.", n, unit))
}

func judge(input string) string {
	var in struct {
		ToolCalls []optimize.ToolCall `json:"toolCalls"`
		Said      []string            `json:"personSaidAboutEarlierAnswer"`
		Answer    string              `json:"answer"`
	}
	if err := json.Unmarshal([]byte(input), &in); err != nil {
		return "not json"
	}
	want := ""
	if len(in.ToolCalls) > 0 {
		want = number.FindString(in.ToolCalls[0].Result)
	}
	v := map[string]any{"correctness": 0.0, "faithfulness": 1.0, "relevancy": 1.0, "userFeedback": -1.0,
		"rationale": "The answer gives the forecast's temperature."}
	if want != "" && strings.Contains(in.Answer, want) {
		v["correctness"] = 1.0
	} else {
		v["rationale"] = "The answer does not give the forecast's temperature."
	}
	for _, n := range number.FindAllString(in.Answer, -1) {
		if n != want {
			v["faithfulness"] = 0.0
		}
	}
	if strings.Contains(strings.Join(in.Said, " "), "unit") {
		v["userFeedback"] = 0.0
		if strings.Contains(in.Answer, "Celsius") {
			v["userFeedback"] = 1.0
		} else {
			v["rationale"] = "The answer gives the temperature without its unit, which the person asked for."
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func reflect(prompt string) string {
	_, rest, _ := strings.Cut(prompt, "```\n")
	current, _, _ := strings.Cut(rest, "\n```")
	switch {
	case strings.Contains(prompt, "too long") && !strings.Contains(current, "one sentence"):
		current += " When spoken, answer in one sentence."
	case strings.Contains(prompt, "without its unit") && !strings.Contains(current, "unit"):
		current += " Always say the unit of every number."
	default:
		current += " Be helpful."
	}
	return "Here is the new instruction:\n```\n" + current + "\n```"
}

func turns(prefix string, n int) []optimize.Turn {
	var out []optimize.Turn
	for i := range n {
		t := optimize.Turn{MessageID: fmt.Sprintf("am_%s%d", prefix, i), Question: "How warm will it be in Paris tomorrow?", Spoken: true,
			Tools: []optimize.ToolCall{{Name: "weather", Arguments: `{"city":"Paris"}`, Result: fmt.Sprintf(`{"temp_c": %d}`, 15+i)}}}
		if i%2 == 1 {
			t.Feedback = []string{"Please always say the unit."}
			t.Vote = -1
		}
		out = append(out, t)
	}
	return out
}

func adapter(s *fakeopenai.Server) *optimize.Adapter {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.URL()
	c := openai.NewClientWithConfig(cfg)
	return &optimize.Adapter{Chat: c, Model: "fake", Judge: optimize.ModelJudge{Chat: c, Model: "fake-judge"},
		Tools: []optimize.ToolDef{{Name: "weather", Description: "The weather forecast for a city.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
}

// GEPA over replayed turns finds, from the judge's and the person's
// feedback, the instructions that make spoken answers short and say their
// unit, within the budget.
func TestOptimiseStoredTurns(t *testing.T) {
	s := fakeModels(t)
	a := adapter(s)
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.URL()
	seed := gepa.Candidate{optimize.ComponentSystem: "You are Alicia, a helpful assistant.", optimize.ComponentVoiceStyle: "Speak naturally."}
	res, err := gepa.Optimize(context.Background(), gepa.Config[optimize.Turn]{Seed: seed, Train: turns("t", 4), Val: turns("v", 4),
		Adapter: a, Reflector: optimize.ModelReflector{Chat: openai.NewClientWithConfig(cfg), Model: "fake-reflect"}, MaxMetricCalls: 80, MinibatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	seedMean, best := res.Pool[0].Mean, res.Pool[res.Best]
	if best.Mean < 0.99 || best.Mean <= seedMean {
		t.Fatalf("best validation mean %.2f (seed %.2f) within %d calls: %v", best.Mean, seedMean, res.MetricCalls, best.Candidate)
	}
	prompt := optimize.SystemPrompt(best.Candidate, true, nil)
	if !strings.Contains(prompt, "one sentence") || !strings.Contains(prompt, "unit") {
		t.Fatalf("the best candidate lacks an instruction the feedback called for: %q", prompt)
	}
	if res.MetricCalls > 80 {
		t.Fatalf("%d metric calls, budget 80", res.MetricCalls)
	}
	t.Logf("seed %.2f → best %.2f in %d metric calls, %d iterations", seedMean, best.Mean, res.MetricCalls, res.Iterations)
}

// Tools are replayed from the record, never run: the recorded call's
// result whatever the formatting of its arguments, and a tool never called
// in the turn gets no result. The candidate's tool description is what the
// model is offered.
func TestReplayUsesRecordedTools(t *testing.T) {
	s := fakeModels(t)
	a := adapter(s)
	turn := turns("r", 1)[0]
	c := gepa.Candidate{optimize.ComponentSystem: "You are Alicia. Answer in one sentence.", "tool:weather": "Forecast by city name (new text)."}
	ev, err := a.Evaluate(context.Background(), []optimize.Turn{turn}, c, true)
	if err != nil {
		t.Fatal(err)
	}
	o := ev.Outcomes[0]
	if o.Output != "It will be 15 degrees." || o.Scores[optimize.DimCorrectness] != 1 || o.Scores[optimize.DimBrevity] != 1 {
		t.Fatalf("outcome %+v", o)
	}
	if !strings.Contains(o.Trace, `"result":"{\"temp_c\": 15}"`) {
		t.Fatalf("trace %s: the recorded result was not replayed", o.Trace)
	}
	var offered string
	for _, r := range s.Requests() {
		for _, tool := range r.Tools {
			offered = tool.Description
		}
	}
	if offered != "Forecast by city name (new text)." {
		t.Fatalf("the model was offered %q, not the candidate's description", offered)
	}
	// A turn whose record has no weather call: the call gets no result.
	turn.Tools = []optimize.ToolCall{{Name: "web_search", Arguments: `{}`, Result: `{"hits":[]}`}}
	ev, err = a.Evaluate(context.Background(), []optimize.Turn{turn}, c, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.Outcomes[0].Trace, "no recorded result") || ev.Outcomes[0].Scores[optimize.DimCorrectness] != 0 {
		t.Fatalf("outcome %+v", ev.Outcomes[0])
	}
	// The reflective records carry the question, the replayed calls and the feedback.
	recs := a.MakeReflectiveDataset(c, ev, []string{"tool:weather", optimize.ComponentSystem})
	if r := recs[optimize.ComponentSystem][0]; !strings.Contains(r.Inputs, "How warm") || !strings.Contains(r.Inputs, "weather(") || r.Feedback == "" {
		t.Fatalf("record %+v", r)
	}
}

// A malformed judge reply is asked again once, then the evaluation fails
// with an error that says so (a run fails cleanly rather than scoring on
// nothing).
func TestJudgeRejectsMalformedVerdicts(t *testing.T) {
	for _, reply := range []string{`not json`, `{"correctness": 2, "faithfulness": 1, "relevancy": 1}`, `{"faithfulness": 1, "relevancy": 1}`} {
		s := fakeopenai.New(t, fakeopenai.WithResponder(func(fakeopenai.Request) fakeopenai.Turn { return fakeopenai.Text(reply) }))
		cfg := openai.DefaultConfig("")
		cfg.BaseURL = s.URL()
		j := optimize.ModelJudge{Chat: openai.NewClientWithConfig(cfg), Model: "fake"}
		if _, err := j.Judge(context.Background(), turns("j", 1)[0], "It will be 15 degrees.", nil); err == nil {
			t.Fatalf("verdict %q accepted", reply)
		}
		if n := len(s.Requests()); n != 2 {
			t.Fatalf("%d judge requests for %q, want 2 (one retry)", n, reply)
		}
	}
}

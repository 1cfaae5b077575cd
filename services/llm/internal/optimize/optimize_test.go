package optimize_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
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

// runner is a Runner over fixed turns and the fakes; it records the reports.
func runner(t *testing.T, stored []optimize.Turn) (*optimize.Runner, *[]protocol.EliteOptions, *[]optimize.Scope) {
	s := fakeModels(t)
	a := adapter(s)
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.URL()
	var reports []protocol.EliteOptions
	var scopes []optimize.Scope
	var mu sync.Mutex
	return &optimize.Runner{
		Turns: func(_ context.Context, sc optimize.Scope, _ int) ([]optimize.Turn, error) {
			mu.Lock()
			defer mu.Unlock()
			scopes = append(scopes, sc)
			return stored, nil
		},
		Seed: func(context.Context, optimize.Scope) (gepa.Candidate, error) {
			return gepa.Candidate{optimize.ComponentSystem: "You are Alicia, a helpful assistant.", optimize.ComponentVoiceStyle: "Speak naturally.",
				"tool:weather": "The weather forecast for a city."}, nil
		},
		Adapter: a, Reflector: optimize.ModelReflector{Chat: openai.NewClientWithConfig(cfg), Model: "fake-reflect"},
		Publish: func(_ context.Context, o *protocol.EliteOptions) error {
			mu.Lock()
			defer mu.Unlock()
			c := *o
			reports = append(reports, c)
			return nil
		},
	}, &reports, &scopes
}

// A run reports its progress after each iteration and ends with the
// front's elites: the texts they change, their scores, and example answers
// beside today's. It learns from the asker's turns alone and applies
// nothing.
func TestRunReportsElites(t *testing.T) {
	stored := turns("s", 8)
	for i := range stored {
		stored[i].Answer = "Let me check the forecast for you, it is a long story."
	}
	rn, reports, scopes := runner(t, stored)
	run := &protocol.OptimizationRun{ID: "or_1", UserID: "us_alice", Scope: protocol.OptimizationRunScopeUser, Budget: 80, CreatedAt: 1}
	if err := rn.Run(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if len(*scopes) != 1 || !slices.Equal((*scopes)[0].UserIDs, []string{"us_alice"}) {
		t.Fatalf("learned from %v, want alice's turns alone", *scopes)
	}
	rs := *reports
	if len(rs) < 2 {
		t.Fatalf("%d reports, want progress then the end", len(rs))
	}
	for i, r := range rs[:len(rs)-1] {
		if r.Status != protocol.EliteOptionsStatusRunning || (i > 0 && r.MetricCalls < rs[i-1].MetricCalls) || r.BestScores == nil {
			t.Fatalf("progress report %d: %+v", i, r)
		}
	}
	last := rs[len(rs)-1]
	if last.Status != protocol.EliteOptionsStatusDone || last.MetricCalls > 80 || len(last.Elites) == 0 || last.FrontSize < 1 {
		t.Fatalf("last report %+v", last)
	}
	best := last.Elites[0]
	changed := strings.Join(slices.Collect(maps.Values(best.Components)), " ")
	if !strings.Contains(changed, "one sentence") || best.Weighted == nil || *best.Weighted < 0.99 || best.Scores["brevity"] != 1 {
		t.Fatalf("best elite %+v", best)
	}
	if _, ok := best.Components["tool:weather"]; ok {
		t.Fatalf("the elite changes a component the run did not name: %v", best.Components)
	}
	if len(best.Examples) == 0 || best.Examples[0].Current != stored[0].Answer || !strings.HasPrefix(best.Examples[0].Candidate, "It will be") {
		t.Fatalf("examples %+v", best.Examples)
	}
	// Its score on every validation example, stored as the run's evaluations.
	_, val := optimize.Split(stored)
	if len(best.Evaluations) != len(val) {
		t.Fatalf("%d evaluations, want one per validation example (%d)", len(best.Evaluations), len(val))
	}
	for i, ev := range best.Evaluations {
		if ev.MessageID != val[i].MessageID || ev.Scores["brevity"] != 1 || ev.Answer == nil || !strings.HasPrefix(*ev.Answer, "It will be") {
			t.Fatalf("evaluation %d %+v", i, ev)
		}
	}
}

// A run whose service stops is handed back: no cancelled or failed report
// (another replica does it again), ErrShutdown returned.
func TestRunHandedBackOnShutdown(t *testing.T) {
	rn, reports, _ := runner(t, turns("h", 6))
	ctx, stop := context.WithCancelCause(context.Background())
	stop(optimize.ErrShutdown)
	err := rn.Run(ctx, &protocol.OptimizationRun{ID: "or_6", UserID: "us_a", Scope: protocol.OptimizationRunScopeUser, Budget: 50})
	if !errors.Is(err, optimize.ErrShutdown) {
		t.Fatalf("err %v, want ErrShutdown", err)
	}
	for _, r := range *reports {
		if r.Status != protocol.EliteOptionsStatusRunning {
			t.Fatalf("a stopping service reported %+v", r)
		}
	}
}

// A run without enough stored turns, or asked to rewrite a component that
// does not exist, fails with a report that says why; a cancelled run ends
// with a cancelled report.
func TestRunFailsAndCancels(t *testing.T) {
	rn, reports, _ := runner(t, turns("f", 3))
	err := rn.Run(context.Background(), &protocol.OptimizationRun{ID: "or_2", UserID: "us_a", Scope: protocol.OptimizationRunScopeUser, Budget: 50})
	last := (*reports)[len(*reports)-1]
	if err == nil || last.Status != protocol.EliteOptionsStatusFailed || last.Error == nil || !strings.Contains(*last.Error, "3 stored answers") {
		t.Fatalf("err %v, report %+v", err, last)
	}
	rn, reports, _ = runner(t, turns("f", 6))
	err = rn.Run(context.Background(), &protocol.OptimizationRun{ID: "or_3", UserID: "us_a", Scope: protocol.OptimizationRunScopeUser, Budget: 50, Components: []string{"tool:nope"}})
	last = (*reports)[len(*reports)-1]
	if err == nil || last.Status != protocol.EliteOptionsStatusFailed || !strings.Contains(*last.Error, `"tool:nope"`) {
		t.Fatalf("err %v, report %+v", err, last)
	}
	err = rn.Run(context.Background(), &protocol.OptimizationRun{ID: "or_4", Scope: protocol.OptimizationRunScopeInstallation, Budget: 50})
	if err == nil || !strings.Contains(err.Error(), "nobody to learn from") {
		t.Fatalf("an installation run with nobody to learn from: %v", err)
	}
	rn, reports, _ = runner(t, turns("c", 6))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rn.Run(ctx, &protocol.OptimizationRun{ID: "or_5", UserID: "us_a", Scope: protocol.OptimizationRunScopeUser, Budget: 50}); err != nil {
		t.Fatalf("a cancelled run: %v", err)
	}
	if last = (*reports)[len(*reports)-1]; last.Status != protocol.EliteOptionsStatusCancelled {
		t.Fatalf("report %+v", last)
	}
}

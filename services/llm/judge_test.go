package llm_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
)

var numbers = regexp.MustCompile(`\d+(\.\d+)?`)

// factJudge is a judge model that scores from checkable facts in its
// prompt: faithfulness (and correctness) 1 when every number the answer
// states is a number of the tool results, else 0; relevancy 1 when the
// answer shares a word with the question. A question containing "garble"
// gets a reply that is not JSON.
func factJudge(req fakeopenai.Request) fakeopenai.Turn {
	p := req.LastUser()
	question, rest, _ := strings.Cut(strings.TrimPrefix(p, "Question:\n"), "\n\nTool results:\n")
	tools, rest, _ := strings.Cut(rest, "\n\nMemories:\n")
	_, answer, _ := strings.Cut(rest, "\n\nAnswer:\n")
	if strings.Contains(question, "garble") {
		return fakeopenai.Text("Scores: all good!")
	}
	known := map[string]bool{}
	for _, n := range numbers.FindAllString(tools, -1) {
		known[n] = true
	}
	faithful, why := 1.0, "every number it states comes from the tool results"
	for _, n := range numbers.FindAllString(answer, -1) {
		if !known[n] {
			faithful, why = 0, n+" is not in the tool results"
		}
	}
	relevant := 0.0
	for _, w := range strings.Fields(strings.ToLower(question)) {
		if len(w) > 3 && strings.Contains(strings.ToLower(answer), strings.Trim(w, "?.!")) {
			relevant = 1
		}
	}
	if numbers.MatchString(question) && numbers.MatchString(answer) {
		relevant = 1
	}
	return fakeopenai.Text(fmt.Sprintf(`{"correctness": %g, "faithfulness": %g, "relevancy": %g, "rationale": "The answer: %s."}`,
		faithful, faithful, relevant, why))
}

// judged is an llm configuration whose judge is a fact judge of its own.
func (h *harness) judged(t *testing.T) (llm.Config, *fakeopenai.Server) {
	judge := fakeopenai.New(t, fakeopenai.WithResponder(factJudge))
	cfg := h.config(h.fake)
	cfg.Judge.URL, cfg.Judge.Model, cfg.Judge.Sample = judge.URL(), "fake-judge", 1
	return cfg, judge
}

// calculatorTurns scripts answers to "what is 2*7+1" that use the
// calculator and then say each of says in turn.
func (h *harness) calculatorTurns(says ...string) {
	var finals, calls []fakeopenai.Turn
	for _, s := range says {
		finals = append(finals, fakeopenai.Text(s))
		calls = append(calls, fakeopenai.Calls(fakeopenai.ToolCall{Name: "calculator", Arguments: `{"expression":"2*7+1"}`}))
	}
	h.fake.On(fakeopenai.HasToolResult(), finals...)
	h.fake.On(fakeopenai.HasTools(), calls...)
}

func judgementsOf(envs []seen) map[string]*protocol.TurnJudgement {
	out := map[string]*protocol.TurnJudgement{}
	for _, j := range bodies[*protocol.TurnJudgement](envs) {
		out[j.MessageID] = j
	}
	return out
}

// TestJudgedTurns: after each answer the judge reads the question, the
// answer and the tool result it used, asks the judge model (JSON output) and
// publishes a TurnJudgement on the agent subject with the Nats-Msg-Id
// {answer}:judge; an answer keeping to the tool result is faithful, one
// stating another number is not. persistence stores one row per answer
// (a redelivered judgement changes nothing) and the conversation's
// aggregates are the means.
func TestJudgedTurns(t *testing.T) {
	h := newHarness(t)
	cfg, judge := h.judged(t)
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	h.calculatorTurns("Two times seven plus one is 15.", "It is 16.")
	first, _, _ := w.answered(t, h.say(cid, "what is 2*7+1?"))
	second, _, _ := w.answered(t, h.say(cid, "what is 2*7+1, again?"))

	envs := w.until(t, 15*time.Second, "two judgements", func(envs []seen) bool { return len(judgementsOf(envs)) == 2 })
	js := judgementsOf(envs)
	good, bad := js[first.ID], js[second.ID]
	if good == nil || bad == nil {
		t.Fatalf("judgements %v, want one of %s and of %s", js, first.ID, second.ID)
	}
	if good.Faithfulness != 1 || good.Correctness != 1 || good.Relevancy != 1 || good.JudgeModel != "fake-judge" || good.ConversationID != cid ||
		!strings.Contains(good.Rationale, "tool results") || good.CreatedAt == 0 {
		t.Fatalf("judgement of the faithful answer: %+v", good)
	}
	if bad.Faithfulness != 0 || !strings.Contains(bad.Rationale, "16 is not in the tool results") {
		t.Fatalf("judgement of the unfaithful answer: %+v", bad)
	}
	for _, s := range envs {
		if j, ok := s.Env.Body.(*protocol.TurnJudgement); ok {
			if want := "alicia.conv." + cid + ".agent.turn_judgement"; s.Subject != want || s.Header.Get(jetstream.MsgIDHeader) != j.MessageID+":judge" {
				t.Fatalf("judgement on %s with Nats-Msg-Id %q", s.Subject, s.Header.Get(jetstream.MsgIDHeader))
			}
		}
	}
	reqs := judge.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"json_object"`) || reqs[0].Stream ||
		!strings.Contains(reqs[0].LastUser(), "calculator(") || !strings.Contains(reqs[0].LastUser(), "15") {
		t.Fatalf("judge requests: %d, first %s", len(reqs), reqs[0].Body)
	}

	// The same judgement again (a redelivered answer end judged twice):
	// JetStream drops it, and the row stays one.
	ack, err := h.pub.PublishAgent(context.Background(), protocol.New(cid, good), first.ID+":judge")
	if err != nil || !ack.Duplicate {
		t.Fatalf("republished judgement: %+v, %v (want a duplicate)", ack, err)
	}
	var rows int
	var correctness, faithfulness, relevancy float64
	testkit.Eventually(t, 10*time.Second, func() bool {
		err := h.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM alicia_message_judgements WHERE conversation_id = $1),
			correctness, faithfulness, relevancy FROM alicia_conversations WHERE id = $1`, cid).Scan(&rows, &correctness, &faithfulness, &relevancy)
		return err == nil && rows == 2
	}, "two judgement rows")
	if correctness != 0.5 || faithfulness != 0.5 || relevancy != 1 {
		t.Fatalf("conversation scores: correctness %v faithfulness %v relevancy %v, want 0.5 0.5 1", correctness, faithfulness, relevancy)
	}
}

// TestJudgeSampleZero: with ALICIA_JUDGE_SAMPLE=0 no judge consumer is
// created and no answer is judged.
func TestJudgeSampleZero(t *testing.T) {
	h := newHarness(t)
	cfg, judge := h.judged(t)
	cfg.Judge.Sample = 0
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.On(fakeopenai.LastUserContains("hello"), fakeopenai.Text("Hello there."))
	sa, _, _ := w.answered(t, h.say(cid, "hello"))
	h.row(t, sa.ID, func(r row) bool { return r.status == "completed" })
	if _, err := h.js.Consumer(context.Background(), bus.StreamConversations, "llm-judge"); err == nil {
		t.Fatal("the judge consumer exists with sampling 0")
	}
	if n := len(judge.Requests()); n != 0 {
		t.Fatalf("%d judge requests with sampling 0", n)
	}
	if js := judgementsOf(w.all()); len(js) != 0 {
		t.Fatalf("judgements with sampling 0: %v", js)
	}
}

// TestJudgeMalformedReply: a judge reply that is not the JSON asked for is
// asked once more, then counted and dropped; the consumer (one answer at a
// time) goes on to judge the next answer.
func TestJudgeMalformedReply(t *testing.T) {
	h := newHarness(t)
	cfg, judge := h.judged(t)
	cfg.Judge.Concurrency = 1
	h.replica(cfg)
	malformed := metrics.Default().Judged.WithLabelValues("malformed")
	before := testutil.ToFloat64(malformed)
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.On(fakeopenai.LastUserContains("garble"), fakeopenai.Text("I cannot read that."))
	h.fake.On(fakeopenai.LastUserContains("hello"), fakeopenai.Text("Hello there."))
	garbled, _, _ := w.answered(t, h.say(cid, "garble this"))
	fine, _, _ := w.answered(t, h.say(cid, "hello"))
	envs := w.until(t, 15*time.Second, "the second answer judged", func(envs []seen) bool { return judgementsOf(envs)[fine.ID] != nil })
	if j := judgementsOf(envs)[garbled.ID]; j != nil {
		t.Fatalf("a malformed reply became a judgement: %+v", j)
	}
	asked := 0
	for _, r := range judge.Requests() {
		if strings.Contains(r.LastUser(), "garble") {
			asked++
		}
	}
	if asked != 2 {
		t.Fatalf("the judge was asked %d times about the garbled answer, want 2 (one retry)", asked)
	}
	if got := testutil.ToFloat64(malformed) - before; got != 1 {
		t.Fatalf("malformed judgements counted: %v, want 1", got)
	}
}

package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// briefModels is one OpenAI-compatible fake for the assistant, the judge
// and the reflection model, each following its prompt: the assistant
// answers in one sentence only when its system prompt says so; the judge
// finds a long answer less relevant (never perfect, so a run spends its
// budget); the reflection model adds the instruction its feedback asks for.
func briefModels(t *testing.T) *fakeopenai.Server {
	return fakeopenai.New(t, fakeopenai.WithResponder(func(r fakeopenai.Request) fakeopenai.Turn {
		switch {
		case len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You judge"):
			var in struct {
				Answer string `json:"answer"`
			}
			_ = json.Unmarshal([]byte(r.LastUser()), &in)
			relevancy, why := 0.9, "The answer is short and to the point."
			if len(strings.Fields(in.Answer)) > 12 {
				relevancy, why = 0.3, "The answer is too long: it rambles beyond the question."
			}
			b, _ := json.Marshal(map[string]any{"correctness": 0.9, "faithfulness": 0.9, "relevancy": relevancy, "userFeedback": -1, "rationale": why})
			return fakeopenai.Text(string(b))
		case strings.HasPrefix(r.LastUser(), "I provided an assistant"):
			_, rest, _ := strings.Cut(r.LastUser(), "```\n")
			current, _, _ := strings.Cut(rest, "\n```")
			if strings.Contains(r.LastUser(), "too long") && !strings.Contains(current, "one sentence") {
				return fakeopenai.Text("```\n" + current + " Answer in one sentence.\n```")
			}
			return fakeopenai.Text("```\n" + current + " Be kind.\n```")
		}
		if len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "one sentence") {
			return fakeopenai.Text("It is done.")
		}
		return fakeopenai.Text("Well, let me tell you everything about that at length, since there is a lot to say about it and I like to talk.")
	}))
}

// reports collects the optimiser's EliteOptions heard on core NATS.
type reports struct {
	mu  sync.Mutex
	all []*protocol.EliteOptions
}

func hearReports(t *testing.T, nc *nats.Conn) *reports {
	rs := &reports{}
	sub, err := nc.Subscribe(subjects.System(protocol.TypeEliteOptions), func(m *nats.Msg) {
		env, err := protocol.Decode(m.Data)
		if err != nil {
			return
		}
		if o, ok := env.Body.(*protocol.EliteOptions); ok {
			rs.mu.Lock()
			rs.all = append(rs.all, o)
			rs.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return rs
}

// of returns run's reports so far.
func (rs *reports) of(run string) []*protocol.EliteOptions {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []*protocol.EliteOptions
	for _, o := range rs.all {
		if o.RunID == run {
			out = append(out, o)
		}
	}
	return out
}

func (rs *reports) last(t *testing.T, run string, what string, cond func(*protocol.EliteOptions) bool) *protocol.EliteOptions {
	t.Helper()
	var last *protocol.EliteOptions
	testkit.Eventually(t, 60*time.Second, func() bool {
		os := rs.of(run)
		if len(os) == 0 {
			return false
		}
		last = os[len(os)-1]
		return cond(last)
	}, what)
	return last
}

// TestOptimizationRun: a run asked for on the bus (OptimizationRun on
// alicia.sys) is taken by an llm replica's optimiser, learns from the
// person's stored turns with the real judge and reflection requests, and
// reports its progress and elites (EliteOptions on alicia.sys): the elite
// carries the instruction that raises the metric, within the budget. A
// second run cancelled on core NATS ends cancelled; neither changes what
// serves (a candidate serves only once promoted).
func TestOptimizationRun(t *testing.T) {
	h := newHarness(t)
	models := briefModels(t)
	cfg := h.config(models)
	h.replica(cfg)
	rs := hearReports(t, h.nc)

	cid := h.conversation()
	w := h.watch(cid)
	var last string
	for _, q := range []string{"Is the oven on?", "Did the kettle boil?", "Are the lights off?", "Is the door locked?", "Is it raining?", "Is the dog fed?"} {
		a, _, _ := w.answered(t, h.say(cid, q))
		last = a.ID
	}
	h.row(t, last, func(r row) bool { return r.status == "completed" })

	publish := func(run *protocol.OptimizationRun) {
		t.Helper()
		if _, err := h.pub.PublishSystem(context.Background(), protocol.New("", run), run.ID); err != nil {
			t.Fatal(err)
		}
	}
	publish(&protocol.OptimizationRun{ID: "or_brief", UserID: testUser, Scope: protocol.OptimizationRunScopeUser,
		Components: []string{"system"}, Budget: 60, CreatedAt: time.Now().UnixMilli()})
	done := rs.last(t, "or_brief", "the run's last report", func(o *protocol.EliteOptions) bool {
		return o.Status != protocol.EliteOptionsStatusRunning
	})
	if done.Status != protocol.EliteOptionsStatusDone || done.MetricCalls > 60 || len(done.Elites) == 0 {
		t.Fatalf("last report %+v", done)
	}
	best := done.Elites[0]
	if !strings.Contains(best.Components["system"], "one sentence") || best.Scores["relevancy"] < 0.89 || len(best.Examples) == 0 ||
		best.Examples[0].Candidate != "It is done." || len(best.Evaluations) == 0 {
		t.Fatalf("best elite %+v", best)
	}
	if first := rs.of("or_brief")[0]; first.Status != protocol.EliteOptionsStatusRunning || first.MetricCalls != 0 {
		t.Fatalf("first report %+v, want the run's start", first)
	}

	// Cancelled while it runs: it ends cancelled, at once.
	publish(&protocol.OptimizationRun{ID: "or_cancel", UserID: testUser, Scope: protocol.OptimizationRunScopeUser,
		Budget: 2000, CreatedAt: time.Now().UnixMilli()})
	rs.last(t, "or_cancel", "the second run under way", func(o *protocol.EliteOptions) bool { return o.MetricCalls > 0 })
	if err := h.nc.Publish(subjects.OptimizeCancel, []byte("or_cancel")); err != nil {
		t.Fatal(err)
	}
	end := rs.last(t, "or_cancel", "the cancelled run's end", func(o *protocol.EliteOptions) bool {
		return o.Status != protocol.EliteOptionsStatusRunning
	})
	if end.Status != protocol.EliteOptionsStatusCancelled || end.MetricCalls >= 2000 {
		t.Fatalf("cancelled run's last report %+v", end)
	}

	// Nothing serves from a run: a new turn still gets the long answer.
	a, sentences, _ := w.answered(t, h.say(cid, "Is the window shut?"))
	if len(sentences) == 0 || strings.Contains(sentences[0].Text, "It is done") {
		t.Fatalf("answer %s after the runs: %+v", a.ID, sentences)
	}
}

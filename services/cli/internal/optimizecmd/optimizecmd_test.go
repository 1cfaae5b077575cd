package optimizecmd_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/optimizecmd"
)

func TestParseWeights(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]float64
		err      string
	}{
		{"two", "correctness=1,brevity=0.5", map[string]float64{"correctness": 1, "brevity": 0.5}, ""},
		{"spaces and a trailing comma", " relevancy = 0 , latency=.25,", map[string]float64{"relevancy": 0, "latency": 0.25}, ""},
		{"above one", "brevity=1.5", nil, "from 0 to 1"},
		{"negative", "brevity=-0.1", nil, "from 0 to 1"},
		{"not a number", "brevity=high", nil, "from 0 to 1"},
		{"NaN", "brevity=NaN", nil, "from 0 to 1"},
		{"no value", "brevity", nil, "dimension=weight"},
		{"no name", "=1", nil, "dimension=weight"},
		{"twice", "brevity=1,brevity=0", nil, "twice"},
		{"empty", " , ", nil, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := optimizecmd.ParseWeights(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseWeights(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("ParseWeights(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			for d, w := range tc.want {
				if v, ok := got[d]; !ok || v != w {
					t.Fatalf("ParseWeights(%q) = %v; want %v", tc.in, got, tc.want)
				}
			}
		})
	}
}

func TestCheckScope(t *testing.T) {
	for _, s := range []string{"mine", "installation"} {
		if err := optimizecmd.CheckScope(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "user", "everyone"} {
		if err := optimizecmd.CheckScope(s); err == nil {
			t.Errorf("scope %q accepted", s)
		}
	}
}

// A run is printed with its progress, its elites' scores in the
// dimensions' order, the texts they change and their examples beside
// today's, multi-line texts indented under their label; what the model
// wrote cannot drive the terminal.
func TestDescribe(t *testing.T) {
	run := api.OptimizationRun{ID: "or_1", Scope: "user", UserID: protocol.Ptr("alice"), Components: []string{"system"}, Budget: 50,
		Weights: map[string]float64{"brevity": 0.5, "correctness": 1}, Status: "done", Iteration: 4, MetricCalls: 48, FrontSize: 2,
		BestScores: map[string]float64{"relevancy": 0.9, "correctness": 0.75}, CreatedAt: 1, StartedAt: protocol.Ptr(int64(2)), FinishedAt: protocol.Ptr(int64(3)),
		Elites: []api.Elite{{
			CandidateID: "pc_or_1_2", Components: map[string]string{"system": "Answer briefly.\nUse units.\x1b]0;owned\x07"},
			Scores:   map[string]float64{"brevity": 1, "correctness": 0.8, "mood": 0.1},
			Weighted: protocol.Ptr(0.87), BestOn: protocol.Ptr(int32(3)), OnFront: protocol.Ptr(true),
			Examples: []api.EliteExample{{MessageID: "am_9", Question: "How far is the moon?", Current: "It is far.\nVery far.",
				Candidate: "384,400 km.\x1b[2J\u202e"}},
		}, {
			CandidateID: "pc_or_1_0", Scores: map[string]float64{"correctness": 0.6}, PromotedAt: protocol.Ptr(int64(4)),
			PromotedVersionIds: []string{"pv_7"},
		}}}
	var out bytes.Buffer
	if err := optimizecmd.Describe(&out, run); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Run or_1 (mine): done\n",
		"  components: system\n",
		"  weights:    correctness 1, brevity 0.5\n",
		"  budget:     50 metric calls, 48 spent\n",
		"  progress:   iteration 4, Pareto front of 2\n",
		"  best:       correctness 0.75  relevancy 0.90\n",
		"alicia optimize promote or_1 <candidate>",
		"\n1. pc_or_1_2  weighted 0.87  best on 3 example(s)  on the front\n",
		"   scores: correctness 0.80  brevity 1.00  mood 0.10\n",
		"   system:\n     │ Answer briefly.\n     │ Use units.\\x1b]0;owned\\x07\n",
		"   example am_9\n     asked:     How far is the moon?\n",
		"     today:     It is far.\n                Very far.\n",
		"     candidate: 384,400 km.\\x1b[2J\\u202e\n",
		"\n2. pc_or_1_0\n   promoted ",
		" as pv_7\n   scores: correctness 0.60\n   changes nothing: what serves now\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\x1b\x07\u202e") {
		t.Errorf("a control character reached the terminal:\n%q", got)
	}
}

// A failed run says why; a queued one has no progress yet.
func TestDescribeFailedAndQueued(t *testing.T) {
	var out bytes.Buffer
	failed := api.OptimizationRun{ID: "or_2", Scope: "installation", Status: "failed", Budget: 10,
		Error: protocol.Ptr("0 stored answers to learn from, 4 needed:\ntalk with Alicia a little more first")}
	if err := optimizecmd.Describe(&out, failed); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "Run or_2 (installation): failed\n") || !strings.Contains(got, "  weights:    every dimension equally\n") ||
		!strings.Contains(got, "  why:        0 stored answers to learn from, 4 needed:\n              talk with Alicia") {
		t.Errorf("failed run:\n%s", got)
	}
	out.Reset()
	if err := optimizecmd.Describe(&out, api.OptimizationRun{ID: "or_3", Scope: "user", Status: "queued", Budget: 10}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "progress:") || strings.Contains(got, "Elites") || !strings.Contains(got, "components: system, voice_style\n") {
		t.Errorf("queued run:\n%s", got)
	}
}

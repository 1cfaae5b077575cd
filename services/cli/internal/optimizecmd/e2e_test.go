package optimizecmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/optimizecmd"
	"github.com/alicia-voice/alicia/services/cli/internal/promptcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/stacktest"
)

func client(t *testing.T, base, key string) *api.Client {
	t.Helper()
	c, err := api.New(base, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cancelOn is a writer that ends ctx once what was written holds word,
// as Ctrl-C would while a person watches.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	word   string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.word) {
		w.cancel()
	}
	return n, err
}

func wantStatus(t *testing.T, what string, err error, status int, says string) {
	t.Helper()
	if api.StatusOf(err) != status || !strings.Contains(err.Error(), says) {
		t.Fatalf("%s: %v; want %d saying %q", what, err, status, says)
	}
}

var runID = regexp.MustCompile(`Run (or_\S+) queued`)

// TestOptimizeAgainstTheGateway drives `alicia optimize` through the real
// gateway with persistence and an llm optimiser: weights changed per
// dimension (the others kept), sharing turned on, the installation's scope
// refused to a person (403) and used by an administrator, a run started (one at a time: 409), watched
// and left going, cancelled while queued, an unknown candidate refused
// (404), another person's run not found (404), and a run over too few
// stored answers ending failed with its reason shown.
func TestOptimizeAgainstTheGateway(t *testing.T) {
	s := stacktest.Start(t)
	ctx := context.Background()
	alice, bob := client(t, s.Base, stacktest.AliceKey), client(t, s.Base, stacktest.BobKey)
	var out bytes.Buffer

	// Weights: the defaults, then two changed and the others kept.
	if err := optimizecmd.Prefs(ctx, alice, "mine", nil, false, &out); err != nil || !strings.Contains(out.String(), "(mine, never set: the defaults)") ||
		!regexp.MustCompile(`(?m)^  latency\s+1$`).MatchString(out.String()) {
		t.Fatalf("default weights: %v\n%s", err, out.String())
	}
	set, err := optimizecmd.ParseWeights("correctness=1,brevity=0.5")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := optimizecmd.Prefs(ctx, alice, "mine", set, false, &out); err != nil || !strings.Contains(out.String(), "(mine, set ") ||
		!regexp.MustCompile(`(?m)^  brevity\s+0.5$`).MatchString(out.String()) {
		t.Fatalf("weights set: %v\n%s", err, out.String())
	}
	out.Reset()
	var prefs api.OptimizePreferences
	if err := optimizecmd.Prefs(ctx, alice, "mine", nil, true, &out); err != nil || json.Unmarshal(out.Bytes(), &prefs) != nil {
		t.Fatalf("weights as JSON: %v\n%s", err, out.String())
	}
	if len(prefs.Weights) != 6 || prefs.Weights["brevity"] != 0.5 || prefs.Weights["relevancy"] != 1 || prefs.UpdatedAt == nil {
		t.Fatalf("stored weights %+v: want brevity 0.5 and the other five kept at 1", prefs)
	}
	bad, _ := optimizecmd.ParseWeights("loudness=1")
	wantStatus(t, "an unknown dimension", optimizecmd.Prefs(ctx, alice, "mine", bad, false, &out), 400, "loudness")

	// Sharing.
	for _, step := range []struct{ arg, want string }{{"status", "Sharing: off"}, {"on", "Sharing: on"}, {"status", "Sharing: on"}} {
		out.Reset()
		if err := optimizecmd.Share(ctx, alice, step.arg, &out); err != nil || !strings.HasPrefix(out.String(), step.want) {
			t.Fatalf("share %s: %v\n%s", step.arg, err, out.String())
		}
	}

	// The installation's scope is the administrators'.
	wantStatus(t, "alice setting the installation's weights", optimizecmd.Prefs(ctx, alice, "installation", set, false, &out), 403, "ALICIA_ADMIN_USERS")
	_, err = optimizecmd.Start(ctx, alice, optimizecmd.StartOptions{Scope: "installation", Budget: 10}, &out)
	wantStatus(t, "alice starting an installation run", err, 403, "administrators")
	wantStatus(t, "alice listing the installation's runs", optimizecmd.List(ctx, alice, "installation", false, &out), 403, "administrators")

	// An administrator's: the installation's weights and runs, which a person does not see.
	admin := client(t, s.Base, stacktest.AdminKey)
	out.Reset()
	if err := optimizecmd.Prefs(ctx, admin, "installation", set, false, &out); err != nil || !strings.Contains(out.String(), "(installation, set ") {
		t.Fatalf("the installation's weights: %v\n%s", err, out.String())
	}
	out.Reset()
	if _, err := optimizecmd.Start(ctx, admin, optimizecmd.StartOptions{Scope: "installation", Budget: 5}, &out); err != nil ||
		!strings.Contains(out.String(), "queued (installation)") {
		t.Fatalf("an installation run: %v\n%s", err, out.String())
	}
	everyone := runID.FindStringSubmatch(out.String())[1]
	out.Reset()
	if err := optimizecmd.List(ctx, admin, "installation", false, &out); err != nil || !strings.Contains(out.String(), everyone) {
		t.Fatalf("the installation's runs: %v\n%s", err, out.String())
	}
	wantStatus(t, "alice showing the installation's run", optimizecmd.Show(ctx, alice, everyone, false, &out), 404, "not found")
	out.Reset()
	if err := optimizecmd.Cancel(ctx, admin, everyone, &out); err != nil || !strings.Contains(out.String(), "cancelled") {
		t.Fatalf("cancelling the installation's run: %v\n%s", err, out.String())
	}

	// A run, queued while no optimiser runs; one at a time.
	out.Reset()
	if _, err := optimizecmd.Start(ctx, alice, optimizecmd.StartOptions{Scope: "mine", Components: []string{"system"}, Budget: 10}, &out); err != nil {
		t.Fatalf("start: %v", err)
	}
	m := runID.FindStringSubmatch(out.String())
	if m == nil || !strings.Contains(out.String(), "improves system within 10 metric calls, weighing correctness 1") {
		t.Fatalf("start said:\n%s", out.String())
	}
	queued := m[1]
	_, err = optimizecmd.Start(ctx, alice, optimizecmd.StartOptions{Scope: "mine", Budget: 10}, &out)
	wantStatus(t, "a second run", err, 409, "still queued")
	out.Reset()
	if err := optimizecmd.List(ctx, alice, "mine", false, &out); err != nil || !regexp.MustCompile(queued+`\s+queued\s+system\s+0/10`).MatchString(out.String()) {
		t.Fatalf("list: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := optimizecmd.List(ctx, bob, "mine", false, &out); err != nil || strings.Contains(out.String(), queued) {
		t.Fatalf("bob's list: %v\n%s", err, out.String())
	}
	wantStatus(t, "bob showing alice's run", optimizecmd.Show(ctx, bob, queued, false, &out), 404, "not found")

	// Watching, then Ctrl-C: the run goes on.
	wctx, stop := context.WithCancel(ctx)
	w := &cancelOn{word: "queued: waiting", cancel: stop}
	if err := optimizecmd.Watch(wctx, alice, queued, 50*time.Millisecond, w); err != nil || !strings.Contains(w.buf.String(), "Stopped watching; run "+queued+" goes on") {
		t.Fatalf("watch interrupted: %v\n%s", err, w.buf.String())
	}
	stop()
	out.Reset()
	if err := optimizecmd.Show(ctx, alice, queued, false, &out); err != nil || !strings.Contains(out.String(), "Run "+queued+" (mine): queued\n") {
		t.Fatalf("after watching: %v\n%s", err, out.String())
	}

	// Cancelled while queued; nothing to promote.
	out.Reset()
	if err := optimizecmd.Cancel(ctx, alice, queued, &out); err != nil || !strings.Contains(out.String(), "Run "+queued+" cancelled") {
		t.Fatalf("cancel: %v\n%s", err, out.String())
	}
	wantStatus(t, "cancelling again", optimizecmd.Cancel(ctx, alice, queued, &out), 409, "already ended (cancelled)")
	out.Reset()
	if err := optimizecmd.Show(ctx, alice, queued, false, &out); err != nil || !strings.Contains(out.String(), "): cancelled\n") || !strings.Contains(out.String(), "No elites") {
		t.Fatalf("show a cancelled run: %v\n%s", err, out.String())
	}
	wantStatus(t, "promoting an unknown candidate", optimizecmd.Promote(ctx, alice, queued, "pc_nothing", nil, &out), 404, "candidate")
	wantStatus(t, "a run that is not there", optimizecmd.Show(ctx, alice, "or_nothing", false, &out), 404, "alicia optimize list")

	// With an optimiser: too few stored answers, the run fails and says why.
	s.StartOptimizer(t)
	out.Reset()
	if _, err := optimizecmd.Start(ctx, alice, optimizecmd.StartOptions{Scope: "mine", Budget: 10}, &out); err != nil {
		t.Fatalf("start again: %v", err)
	}
	failed := runID.FindStringSubmatch(out.String())[1]
	wctx, stop = context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	out.Reset()
	if err := optimizecmd.Watch(wctx, alice, failed, 50*time.Millisecond, &out); err != nil ||
		!strings.Contains(out.String(), "failed: 0 stored answers to learn from, 4 needed") {
		t.Fatalf("watch until it ends: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := optimizecmd.Show(ctx, alice, failed, false, &out); err != nil || !strings.Contains(out.String(), "): failed\n") ||
		!strings.Contains(out.String(), "  why:        0 stored answers to learn from, 4 needed") {
		t.Fatalf("show a failed run: %v\n%s", err, out.String())
	}
	wantStatus(t, "promoting from a failed run", optimizecmd.Promote(ctx, alice, failed, "pc_nothing", nil, &out), 409, "is failed")
	wantStatus(t, "a rollback with nothing promoted", optimizecmd.Rollback(ctx, alice, "system", "mine", &out), 404, "")
}

// lines is a writer that hands each write to a channel, as a person
// reading watch's output would see it.
type lines chan string

func (l lines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

// await reads l until a write holds word.
func (l lines) await(t *testing.T, word string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case s := <-l:
			if strings.Contains(s, word) {
				return s
			}
		case <-timeout:
			t.Fatalf("watch never wrote %q", word)
		}
	}
}

// TestOptimizeWatchPromoteRollback follows a run as the optimiser reports
// it (queued, running with progress, done with an elite), shows the elite
// with its example beside today's answer and a model's escape sequence
// made harmless, promotes it to half of the new conversations, refuses a
// second promotion (409) and rolls it back.
func TestOptimizeWatchPromoteRollback(t *testing.T) {
	s := stacktest.Start(t)
	ctx := context.Background()
	alice := client(t, s.Base, stacktest.AliceKey)
	var out bytes.Buffer
	r, err := optimizecmd.Start(ctx, alice, optimizecmd.StartOptions{Scope: "mine", Components: []string{"system"}, Budget: 50}, &out)
	if err != nil {
		t.Fatal(err)
	}
	report := func(status protocol.EliteOptionsStatus, elites ...protocol.Elite) {
		t.Helper()
		o := &protocol.EliteOptions{RunID: r.ID, Status: status, Iteration: 3, MetricCalls: 42, Budget: 50, FrontSize: 1,
			BestScores: protocol.EliteOptionsBestScores{"relevancy": 0.9, "brevity": 1}, Elites: elites}
		if _, err := s.Pub.PublishSystem(ctx, protocol.New("", o), ""); err != nil {
			t.Fatal(err)
		}
	}

	seen := make(lines, 64)
	watched := make(chan error, 1)
	go func() { watched <- optimizecmd.Watch(ctx, alice, r.ID, 20*time.Millisecond, seen) }()
	seen.await(t, "queued: waiting for an optimiser")
	report(protocol.EliteOptionsStatusRunning)
	if line := seen.await(t, "running:"); !strings.Contains(line, "iteration 3, 42/50 metric calls, front 1, best relevancy 0.90  brevity 1.00") {
		t.Fatalf("progress line %q", line)
	}
	report(protocol.EliteOptionsStatusDone, protocol.Elite{CandidateID: "pc_brief_cli", Components: protocol.EliteComponents{"system": "Answer in one sentence."},
		Scores: protocol.EliteScores{"relevancy": 0.9, "brevity": 1}, Weighted: protocol.Ptr(0.95), BestOn: protocol.Ptr(int32(3)),
		Examples: []protocol.Example{{MessageID: "am_cli", Question: "Is the oven on?", Current: "Well, let me tell you at length.",
			Candidate: "It is off.\x1b]0;pwned\x07"}},
		Evaluations: []protocol.Evaluation{{MessageID: "am_cli", Scores: protocol.EvaluationScores{"relevancy": 0.9}, Answer: protocol.Ptr("It is off.")}}})
	seen.await(t, "done:")
	var final strings.Builder
	for done := false; !done; {
		select {
		case s := <-seen:
			final.WriteString(s)
		case err := <-watched:
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			for len(seen) > 0 {
				final.WriteString(<-seen)
			}
			done = true
		}
	}
	for _, want := range []string{"Run " + r.ID + " (mine): done\n", "1. pc_brief_cli  weighted 0.95  best on 3 example(s)",
		"   scores: relevancy 0.90  brevity 1.00\n", "     │ Answer in one sentence.\n", "     today:     Well, let me tell you at length.\n",
		"     candidate: It is off.\\x1b]0;pwned\\x07\n"} {
		if !strings.Contains(final.String(), want) {
			t.Fatalf("watch's last word lacks %q:\n%s", want, final.String())
		}
	}

	half := 0.5
	out.Reset()
	if err := optimizecmd.Promote(ctx, alice, r.ID, "pc_brief_cli", &half, &out); err != nil ||
		!regexp.MustCompile(`^pv_\S+ \(system version 1\) now serves 50% of new conversations .*; undo: alicia optimize rollback system\n$`).MatchString(out.String()) {
		t.Fatalf("promote: %v\n%s", err, out.String())
	}
	version := strings.Fields(out.String())[0]
	out.Reset()
	if err := optimizecmd.Show(ctx, alice, r.ID, false, &out); err != nil || !strings.Contains(out.String(), " as "+version+"\n") {
		t.Fatalf("the promotion is not shown: %v\n%s", err, out.String())
	}
	wantStatus(t, "promoting it again", optimizecmd.Promote(ctx, alice, r.ID, "pc_brief_cli", nil, &out), 409, "promoted already")
	out.Reset()
	if err := optimizecmd.Rollback(ctx, alice, "system", "mine", &out); err != nil || !strings.HasPrefix(out.String(), "Rolled back") {
		t.Fatalf("rollback: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := promptcmd.List(ctx, alice, "system", "mine", false, &out); err != nil ||
		!regexp.MustCompile(`(?m)^`+version+`\s+1\s+retired\s.*run:`+r.ID).MatchString(out.String()) {
		t.Fatalf("after the rollback the version made by the run is not retired: %v\n%s", err, out.String())
	}
}

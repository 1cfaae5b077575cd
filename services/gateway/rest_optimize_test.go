package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// heard collects what the gateway publishes on a core NATS subject.
type heard struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func hear(t *testing.T, nc *nats.Conn, subject string) *heard {
	t.Helper()
	h := &heard{}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) { h.mu.Lock(); h.msgs = append(h.msgs, m); h.mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *heard) all() []*nats.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}

// optimiserReport is what the llm's optimiser publishes about a run.
func optimiserReport(run string, status protocol.EliteOptionsStatus, elites ...protocol.Elite) protocol.Envelope {
	return protocol.New("", &protocol.EliteOptions{RunID: run, Status: status, Iteration: 3, MetricCalls: 42, Budget: 50, FrontSize: 2,
		BestScores: protocol.EliteOptionsBestScores{"relevancy": 0.9, "brevity": 1}, Elites: elites})
}

// Prompt optimisation over REST: the dimension weights and the opt-in of
// a scope; a run started (one at a time per scope), its progress and
// elites as the optimiser reports them, promotion of an elite into new
// active versions recorded on the candidate and undone by rollback, and
// cancellation. A person sees and changes only their own runs; the
// installation's are the administrators', learning from the
// administrators' conversations and those of the people who opted in.
func TestOptimizeREST(t *testing.T) {
	s := newStack(t)

	// Weights: equal until set; checked; the installation's need an administrator.
	var prefs restapi.OptimizePreferences
	s.call(t, aliceKey, "GET", "/v1/optimize/preferences", nil).want(http.StatusOK, &prefs)
	if prefs.Scope != "mine" || prefs.UpdatedAt != nil || prefs.Weights["correctness"] != 1 || len(prefs.Weights) != 6 {
		t.Fatalf("default weights %+v", prefs)
	}
	s.call(t, aliceKey, "PUT", "/v1/optimize/preferences", map[string]any{"weights": map[string]any{"loudness": 1}}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "PUT", "/v1/optimize/preferences", map[string]any{"weights": map[string]any{"brevity": 1.5}}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "PUT", "/v1/optimize/preferences", map[string]any{"weights": map[string]any{"brevity": 0}}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "PUT", "/v1/optimize/preferences", map[string]any{"scope": "installation", "weights": map[string]any{"brevity": 1}}).
		wantError(http.StatusForbidden)
	prefs = restapi.OptimizePreferences{} // decoding into a map merges
	s.call(t, aliceKey, "PUT", "/v1/optimize/preferences", map[string]any{"weights": map[string]any{"brevity": 1, "correctness": 0.5}}).
		want(http.StatusOK, &prefs)
	if prefs.UpdatedAt == nil || prefs.Weights["brevity"] != 1 || prefs.Weights["correctness"] != 0.5 || len(prefs.Weights) != 2 {
		t.Fatalf("alice's weights %+v", prefs)
	}
	prefs = restapi.OptimizePreferences{}
	s.call(t, bobKey, "GET", "/v1/optimize/preferences", nil).want(http.StatusOK, &prefs)
	if prefs.UpdatedAt != nil {
		t.Fatalf("bob sees alice's weights: %+v", prefs)
	}

	// Opting in.
	var sharing restapi.OptimizeSharing
	s.call(t, aliceKey, "GET", "/v1/optimize/sharing", nil).want(http.StatusOK, &sharing)
	if sharing.Share {
		t.Fatal("alice shares before opting in")
	}
	s.call(t, aliceKey, "PUT", "/v1/optimize/sharing", map[string]any{"share": true}).want(http.StatusOK, &sharing)
	if !sharing.Share {
		t.Fatal("alice's opt-in not stored")
	}

	// A run: queued with her weights; one at a time; hers alone.
	runs := hear(t, s.nc, subjects.System(protocol.TypeOptimizationRun))
	s.call(t, aliceKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 0}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 50, "components": []string{"memory_extraction"}}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 50, "scope": "installation"}).wantError(http.StatusForbidden)
	var run restapi.OptimizationRun
	s.call(t, aliceKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 50, "components": []string{"system"}}).want(http.StatusAccepted, &run)
	if !strings.HasPrefix(run.ID, "or_") || run.Status != "queued" || run.Scope != "user" || run.Budget != 50 ||
		!slices.Equal(run.Components, []string{"system"}) || run.Weights["brevity"] != 1 || len(run.Elites) != 0 {
		t.Fatalf("alice's run %+v", run)
	}
	s.call(t, aliceKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 50}).wantError(http.StatusConflict)
	s.call(t, bobKey, "GET", "/v1/optimize/runs/"+run.ID, nil).wantError(http.StatusNotFound)
	s.call(t, adminKey, "GET", "/v1/optimize/runs/"+run.ID, nil).wantError(http.StatusNotFound)
	var list restapi.OptimizationRunList
	s.call(t, bobKey, "GET", "/v1/optimize/runs", nil).want(http.StatusOK, &list)
	if len(list.Runs) != 0 {
		t.Fatalf("bob lists %+v", list.Runs)
	}

	// The optimiser reports it; promotion needs it ended.
	elite := protocol.Elite{CandidateID: "pc_brief", Components: protocol.EliteComponents{"system": "Answer in one sentence."},
		Scores: protocol.EliteScores{"relevancy": 0.9, "brevity": 1}, Weighted: protocol.Ptr(0.95), BestOn: protocol.Ptr(int32(3)),
		Examples:    []protocol.Example{{MessageID: "am_x", Question: "Is the oven on?", Current: "Well, let me tell you at length.", Candidate: "It is off."}},
		Evaluations: []protocol.Evaluation{{MessageID: "am_x", Scores: protocol.EvaluationScores{"relevancy": 0.9}, Answer: protocol.Ptr("It is off.")}}}
	s.publish(t, "", optimiserReport(run.ID, protocol.EliteOptionsStatusRunning))
	s.call(t, aliceKey, "GET", "/v1/optimize/runs/"+run.ID, nil).want(http.StatusOK, &run)
	if run.Status != "running" || run.MetricCalls != 42 || run.FrontSize != 2 || run.BestScores["brevity"] != 1 || run.StartedAt == nil {
		t.Fatalf("running %+v", run)
	}
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+run.ID+"/select", map[string]any{"candidateId": "pc_brief"}).wantError(http.StatusConflict)
	s.publish(t, "", optimiserReport(run.ID, protocol.EliteOptionsStatusDone, elite))
	s.call(t, aliceKey, "GET", "/v1/optimize/runs/"+run.ID, nil).want(http.StatusOK, &run)
	if run.Status != "done" || run.FinishedAt == nil || len(run.Elites) != 1 {
		t.Fatalf("done %+v", run)
	}
	e := run.Elites[0]
	if e.CandidateID != "pc_brief" || e.Components["system"] != "Answer in one sentence." || e.Weighted == nil || *e.Weighted != 0.95 ||
		len(e.Examples) != 1 || e.Examples[0].Candidate != "It is off." || e.PromotedAt != nil {
		t.Fatalf("elite %+v", e)
	}
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+run.ID+"/cancel", nil).wantError(http.StatusConflict)

	// Promoted: a new version of hers, active for all her new
	// conversations, made by the run; recorded on the candidate.
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+run.ID+"/select", map[string]any{"candidateId": "pc_nope"}).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+run.ID+"/select", map[string]any{"candidateId": "pc_brief", "rolloutShare": 2}).
		wantError(http.StatusBadRequest)
	var selected restapi.EliteSelected
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+run.ID+"/select", map[string]any{"candidateId": "pc_brief"}).want(http.StatusOK, &selected)
	if len(selected.Versions) != 1 {
		t.Fatalf("versions made %+v", selected.Versions)
	}
	v := selected.Versions[0]
	if v.Component != "system" || v.Text != "Answer in one sentence." || v.Status != "active" || v.UserID == nil || *v.UserID != "alice" ||
		v.CreatedBy != "run:"+run.ID || v.Version != 1 || v.RolloutShare != nil {
		t.Fatalf("version made %+v", v)
	}
	s.call(t, aliceKey, "GET", "/v1/optimize/runs/"+run.ID, nil).want(http.StatusOK, &run)
	if p := run.Elites[0]; p.PromotedAt == nil || !slices.Equal(p.PromotedVersionIds, []string{v.ID}) {
		t.Fatalf("promotion not recorded: %+v", p)
	}
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+run.ID+"/select", map[string]any{"candidateId": "pc_brief"}).wantError(http.StatusConflict)
	var rb restapi.PromptRolledBack
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/rollback", map[string]any{"component": "system"}).want(http.StatusOK, &rb)
	var pv restapi.PromptVersionList
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=system", nil).want(http.StatusOK, &pv)
	if len(pv.Versions) != 1 || pv.Versions[0].Status != "retired" {
		t.Fatalf("after rollback %+v", pv.Versions)
	}

	// A queued run cancelled: recorded at once, and the optimisers told.
	cancels := hear(t, s.nc, subjects.OptimizeCancel)
	var second restapi.OptimizationRun
	s.call(t, aliceKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 10}).want(http.StatusAccepted, &second)
	s.call(t, bobKey, "POST", "/v1/optimize/runs/"+second.ID+"/cancel", nil).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "POST", "/v1/optimize/runs/"+second.ID+"/cancel", nil).want(http.StatusAccepted, &second)
	if second.Status != "cancelled" {
		t.Fatalf("cancelled run %+v", second)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		got := cancels.all()
		return len(got) == 1 && string(got[0].Data) == second.ID
	}, "the cancellation on core NATS")
	// A late report of an optimiser that took it meanwhile revives nothing.
	s.publish(t, "", optimiserReport(second.ID, protocol.EliteOptionsStatusRunning))
	s.call(t, aliceKey, "GET", "/v1/optimize/runs/"+second.ID, nil).want(http.StatusOK, &second)
	if second.Status != "cancelled" {
		t.Fatalf("a cancelled run became %s", second.Status)
	}
	s.call(t, aliceKey, "GET", "/v1/optimize/runs", nil).want(http.StatusOK, &list)
	if len(list.Runs) != 2 || list.Runs[0].ID != second.ID || list.Runs[1].ID != run.ID {
		t.Fatalf("alice's runs %+v", list.Runs)
	}

	// The installation's: the administrator's, learning from the
	// administrators and alice (who opted in), not bob.
	var inst restapi.OptimizationRun
	s.call(t, adminKey, "POST", "/v1/optimize/runs", map[string]any{"budget": 20, "scope": "installation"}).want(http.StatusAccepted, &inst)
	if inst.Scope != "installation" {
		t.Fatalf("installation run %+v", inst)
	}
	var asked *protocol.OptimizationRun
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, m := range runs.all() {
			if env, err := protocol.Decode(m.Data); err == nil {
				if r := env.Body.(*protocol.OptimizationRun); r.ID == inst.ID {
					asked = r
				}
			}
		}
		return asked != nil
	}, "the installation run on the bus")
	if !slices.Equal(asked.LearnFrom, []string{"alice", "root"}) || asked.UserID != "root" {
		t.Fatalf("installation run learns from %v (asked by %s), want alice and root", asked.LearnFrom, asked.UserID)
	}
	s.call(t, aliceKey, "GET", "/v1/optimize/runs/"+inst.ID, nil).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "GET", "/v1/optimize/runs?scope=installation", nil).wantError(http.StatusForbidden)
}

// An answer's details name the prompt versions that produced it and its
// judged scores; the conversation, its last voice call's SessionStats.
func TestMessageVersionsAndJudgement(t *testing.T) {
	s := newStack(t)
	cid := "ac_judged"
	s.publish(t, "", promptVersion("pv_sys1", 1, "", protocol.PromptVersionStatusActive))
	s.publish(t, "alice",
		protocol.New(cid, &protocol.UserMessage{ID: "am_ju1", ConversationID: cid, Content: "hi"}),
		protocol.New(cid, &protocol.StartAnswer{ID: "am_ja1", PreviousID: "am_ju1", ConversationID: cid, PromptVersions: []string{"pv_sys1", "pv_gone"}}),
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_ja1", ConversationID: cid, Sequence: 1, Text: "Hello.", IsFinal: protocol.Ptr(true)}),
		protocol.New(cid, &protocol.TurnJudgement{MessageID: "am_ja1", ConversationID: cid, Correctness: 0.8, Faithfulness: 1, Relevancy: 0.9,
			Rationale: "A fitting greeting.", JudgeModel: "fake-judge", CreatedAt: time.Now().UnixMilli()}))
	var conv restapi.ConversationWithMessages
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid, nil).want(http.StatusOK, &conv)
	var answer *restapi.Message
	for i := range conv.Messages {
		if conv.Messages[i].ID == "am_ja1" {
			answer = &conv.Messages[i]
		}
	}
	if answer == nil {
		t.Fatalf("no answer in %+v", conv.Messages)
	}
	pv := answer.PromptVersions
	if len(pv) != 2 || pv[0].ID != "pv_sys1" || pv[0].Component != "system" || pv[0].Version == nil || *pv[0].Version != 1 ||
		pv[1].ID != "pv_gone" || pv[1].Version != nil {
		t.Fatalf("prompt versions %+v", pv)
	}
	j := answer.Judgement
	if j == nil || j.Correctness != 0.8 || j.Faithfulness != 1 || j.Relevancy != 0.9 || j.Rationale != "A fitting greeting." || j.Model == nil || *j.Model != "fake-judge" {
		t.Fatalf("judgement %+v", j)
	}
	for _, m := range conv.Messages {
		if m.ID == "am_ju1" && (m.Judgement != nil || len(m.PromptVersions) != 0) {
			t.Fatalf("the question has answer details: %+v", m)
		}
	}
	if conv.LastVoiceSession != nil {
		t.Fatalf("a voice session before any call: %+v", conv.LastVoiceSession)
	}

	// The last voice call's SessionStats.
	s.publish(t, "", protocol.New(cid, &protocol.SessionStats{MessageCount: 2, ToolCallCount: 1, MemoriesUsed: 3, SessionDurationMs: 42_000}))
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid, nil).want(http.StatusOK, &conv)
	if v := conv.LastVoiceSession; v == nil || v.MessageCount != 2 || v.ToolCallCount != 1 || v.MemoriesUsed != 3 || v.DurationMs != 42_000 ||
		v.EndedAt-v.StartedAt != 42_000 {
		t.Fatalf("last voice session %+v", v)
	}
}

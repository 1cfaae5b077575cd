package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
)

func promptVersion(id string, version int32, user string, status protocol.PromptVersionStatus) protocol.Envelope {
	pv := &protocol.PromptVersion{ID: id, Component: "system", Version: version, Text: "text of " + id, Status: status,
		CreatedBy: "run:test", CreatedAt: time.Now().UnixMilli()}
	if user != "" {
		pv.UserID = &user
	}
	return protocol.New("", pv)
}

// The prompt versions over REST: listed with the answers each shaped and
// their votes; a person promotes and rolls back their own, an
// administrator the installation's; nobody another person's.
func TestPromptVersionsREST(t *testing.T) {
	s := newStack(t)
	active, candidate := protocol.PromptVersionStatusActive, protocol.PromptVersionStatusCandidate
	s.publish(t, "", promptVersion("pv_i1", 1, "", active), promptVersion("pv_i2", 2, "", candidate),
		promptVersion("pv_a1", 1, "alice", candidate), promptVersion("pv_b1", 1, "bob", candidate))
	cid := "ac_prompts"
	s.publish(t, "alice",
		protocol.New(cid, &protocol.UserMessage{ID: "am_pu1", ConversationID: cid, Content: "hi"}),
		protocol.New(cid, &protocol.StartAnswer{ID: "am_pa1", PreviousID: "am_pu1", ConversationID: cid, PromptVersions: []string{"pv_i1"}}),
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_pa1", ConversationID: cid, Sequence: 1, Text: "Hello.", IsFinal: protocol.Ptr(true)}),
		protocol.New(cid, &protocol.UserMessage{ID: "am_pu2", PreviousID: protocol.Ptr("am_pa1"), ConversationID: cid, Content: "and?"}),
		protocol.New(cid, &protocol.StartAnswer{ID: "am_pa2", PreviousID: "am_pu2", ConversationID: cid, PromptVersions: []string{"pv_i1"}}),
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_pa2", ConversationID: cid, Sequence: 1, Text: "And so.", IsFinal: protocol.Ptr(true)}),
		protocol.New(cid, &protocol.TurnJudgement{MessageID: "am_pa1", ConversationID: cid, Correctness: 1, Faithfulness: 1, Relevancy: 0.9,
			Rationale: "Fine.", JudgeModel: "j", CreatedAt: 1}),
		protocol.New(cid, &protocol.TurnJudgement{MessageID: "am_pa2", ConversationID: cid, Correctness: 0.5, Faithfulness: 1, Relevancy: 0.7,
			Rationale: "Vague.", JudgeModel: "j", CreatedAt: 1}))
	s.call(t, aliceKey, "POST", "/v1/messages/am_pa1/votes", map[string]any{"vote": "up"}).want(http.StatusOK, nil)

	var list restapi.PromptVersionList
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=system&scope=installation", nil).want(http.StatusOK, &list)
	if len(list.Versions) != 2 || list.Versions[0].ID != "pv_i2" || list.Versions[1].ID != "pv_i1" ||
		list.Versions[1].Answers != 2 || list.Versions[1].UpVotes != 1 || list.Versions[1].Status != "active" {
		t.Fatalf("installation versions %+v", list.Versions)
	}
	// Its vote rate and judged scores, with 95 % intervals: one up vote of
	// one (Wilson: 0.207..1); correctness 1 and 0.5 (t, 1 df: mean 0.75,
	// the interval clipped to 0..1); none of the candidate's answers.
	i1 := list.Versions[1]
	if r := i1.UpVoteRate; r == nil || r.Estimate != 1 || r.Low != 0.207 || r.High != 1 {
		t.Fatalf("vote rate %+v", r)
	}
	if j := i1.Judged; j == nil || j.Count != 2 || j.Correctness.Estimate != 0.75 || j.Correctness.Low != 0 || j.Correctness.High != 1 ||
		j.Faithfulness.Estimate != 1 || j.Faithfulness.Low != 1 || j.Relevancy.Estimate != 0.8 {
		t.Fatalf("judged %+v", j)
	}
	if list.Versions[0].UpVoteRate != nil || list.Versions[0].Judged != nil {
		t.Fatalf("a version without answers has a rate or scores: %+v", list.Versions[0])
	}
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=system", nil).want(http.StatusOK, &list)
	if len(list.Versions) != 1 || list.Versions[0].ID != "pv_a1" {
		t.Fatalf("alice's versions %+v: want hers only", list.Versions)
	}
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=nonsense", nil).wantError(http.StatusBadRequest)

	// Alice: not the installation's, not bob's; her own, at a share.
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/pv_i2/promote", map[string]any{}).wantError(http.StatusForbidden)
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/pv_b1/promote", map[string]any{}).wantError(http.StatusForbidden)
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/pv_nope/promote", map[string]any{}).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/pv_a1/promote", map[string]any{"rolloutShare": 1.5}).wantError(http.StatusBadRequest)
	var v restapi.PromptVersion
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/pv_a1/promote", map[string]any{"rolloutShare": 0.25}).want(http.StatusOK, &v)
	if v.Status != "active" || v.RolloutShare == nil || *v.RolloutShare != 0.25 {
		t.Fatalf("alice's promoted version %+v", v)
	}
	var rb restapi.PromptRolledBack
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/rollback", map[string]any{"component": "system"}).want(http.StatusOK, &rb)
	if rb.Serving != nil {
		t.Fatalf("alice's rollback: serving %v, want none of hers", *rb.Serving)
	}

	// The administrator: promote the installation's, then roll it back.
	s.call(t, aliceKey, "POST", "/v1/prompt-versions/rollback", map[string]any{"component": "system", "scope": "installation"}).wantError(http.StatusForbidden)
	v = restapi.PromptVersion{}
	s.call(t, adminKey, "POST", "/v1/prompt-versions/pv_i2/promote", map[string]any{}).want(http.StatusOK, &v)
	if v.Status != "active" || v.RolloutShare != nil || v.UserID != nil {
		t.Fatalf("promoted %+v", v)
	}
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=system&scope=installation", nil).want(http.StatusOK, &list)
	if list.Versions[0].Status != "active" || list.Versions[1].Status != "retired" {
		t.Fatalf("after promotion %+v", list.Versions)
	}
	s.call(t, adminKey, "POST", "/v1/prompt-versions/rollback", map[string]any{"component": "system", "scope": "installation"}).want(http.StatusOK, &rb)
	if rb.Serving == nil || *rb.Serving != "pv_i1" {
		t.Fatalf("rollback serving %v, want pv_i1", rb.Serving)
	}
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=system&scope=installation", nil).want(http.StatusOK, &list)
	if list.Versions[0].Status != "retired" || list.Versions[1].Status != "active" {
		t.Fatalf("after rollback %+v", list.Versions)
	}
}

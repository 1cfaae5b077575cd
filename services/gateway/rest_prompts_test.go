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
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_pa1", ConversationID: cid, Sequence: 1, Text: "Hello.", IsFinal: protocol.Ptr(true)}))
	s.call(t, aliceKey, "POST", "/v1/messages/am_pa1/votes", map[string]any{"vote": "up"}).want(http.StatusOK, nil)

	var list restapi.PromptVersionList
	s.call(t, aliceKey, "GET", "/v1/prompt-versions?component=system&scope=installation", nil).want(http.StatusOK, &list)
	if len(list.Versions) != 2 || list.Versions[0].ID != "pv_i2" || list.Versions[1].ID != "pv_i1" ||
		list.Versions[1].Answers != 1 || list.Versions[1].UpVotes != 1 || list.Versions[1].Status != "active" {
		t.Fatalf("installation versions %+v", list.Versions)
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

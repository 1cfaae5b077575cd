package persistence_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

func promptVersion(id, component string, version int32, user string, status protocol.PromptVersionStatus, share *float64) *protocol.PromptVersion {
	pv := &protocol.PromptVersion{ID: id, Component: component, Version: version, Text: "text of " + id, Status: status,
		RolloutShare: share, CreatedBy: "seed", CreatedAt: 1_700_000_000_000}
	if user != "" {
		pv.UserID = &user
	}
	return pv
}

// versionStates reads every prompt version as "id=status[@share]", sorted.
func versionStates(t *testing.T, s *stack) string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT id, status, rollout_share FROM alicia_prompt_versions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, status string
		var share *float32
		if err := rows.Scan(&id, &status, &share); err != nil {
			t.Fatal(err)
		}
		if share != nil {
			status += fmt.Sprintf("@%g", *share)
		}
		out = append(out, id+"="+status)
	}
	return strings.Join(out, " ")
}

// TestPromptVersions walks versions through promotion, rollout and
// rollback: each step publishes a PromptVersion on alicia.sys, waits until
// persistence applied it and reads every version's status.
func TestPromptVersions(t *testing.T) {
	s := newStack(t)
	s.start()
	active, retired, candidate := protocol.PromptVersionStatusActive, protocol.PromptVersionStatusRetired, protocol.PromptVersionStatusCandidate
	half := 0.5
	steps := []struct {
		name string
		body *protocol.PromptVersion
		want string
	}{
		{"a seed is active", promptVersion("pv_a", "system", 1, "", active, nil), "pv_a=active"},
		{"the same seed again changes nothing", promptVersion("pv_a", "system", 1, "", active, nil), "pv_a=active"},
		{"a candidate serves nothing and retires nothing", promptVersion("pv_b", "system", 2, "", candidate, nil), "pv_a=active pv_b=candidate"},
		{"a rollout at 0.5 keeps the full version", promptVersion("pv_b", "system", 2, "", active, &half), "pv_a=active pv_b=active@0.5"},
		{"another component is its own", promptVersion("pv_t", "tool:calculator", 1, "", active, nil), "pv_a=active pv_b=active@0.5 pv_t=active"},
		{"a person's version leaves the installation's alone", promptVersion("pv_u", "system", 1, "user-1", active, nil),
			"pv_a=active pv_b=active@0.5 pv_t=active pv_u=active"},
		{"a second rollout replaces the first only", promptVersion("pv_c", "system", 3, "", active, &half),
			"pv_a=active pv_b=retired@0.5 pv_c=active@0.5 pv_t=active pv_u=active"},
		{"promoted to all, it retires the full one", promptVersion("pv_c", "system", 3, "", active, nil),
			"pv_a=retired pv_b=retired@0.5 pv_c=active pv_t=active pv_u=active"},
		{"rollback: the previous one active again retires the current", promptVersion("pv_a", "system", 1, "", active, nil),
			"pv_a=active pv_b=retired@0.5 pv_c=retired pv_t=active pv_u=active"},
		{"a version number taken by another id is dropped", promptVersion("pv_x", "system", 1, "", active, nil),
			"pv_a=active pv_b=retired@0.5 pv_c=retired pv_t=active pv_u=active"},
		{"a person's version retired", promptVersion("pv_u", "system", 1, "user-1", retired, nil),
			"pv_a=active pv_b=retired@0.5 pv_c=retired pv_t=active pv_u=retired"},
	}
	for _, st := range steps {
		s.applied(bus.StreamSystem, s.system(st.body, nil))
		if got := versionStates(t, s); got != st.want {
			t.Fatalf("%s: versions %s, want %s", st.name, got, st.want)
		}
	}
	// The text and origin are the first envelope's: a later one with the
	// same id changes only status and share.
	later := promptVersion("pv_a", "system", 1, "", active, nil)
	later.Text = "rewritten"
	s.applied(bus.StreamSystem, s.system(later, nil))
	if n := s.queryInt(`SELECT count(*) FROM alicia_prompt_versions WHERE id = 'pv_a' AND text = 'text of pv_a'`); n != 1 {
		t.Fatalf("a later envelope of pv_a changed its text")
	}
	// An unknown component is dead-lettered, not stored.
	s.applied(bus.StreamSystem, s.system(promptVersion("pv_bad", "nonsense", 1, "", active, nil), nil))
	if n := s.queryInt(`SELECT count(*) FROM alicia_prompt_versions WHERE id = 'pv_bad'`); n != 0 {
		t.Fatalf("a version of an unknown component was stored")
	}
}

// TestAnswerPromptVersions: a StartAnswer's promptVersions are stored on
// the answer's row; an answer without them leaves the column NULL.
func TestAnswerPromptVersions(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := protocol.NewID("ac")
	s.client(cid, 1, &protocol.UserMessage{ID: "am_u1", ConversationID: cid, Content: "hi"}, nil)
	s.server(cid, &protocol.StartAnswer{ID: "am_a1", PreviousID: "am_u1", ConversationID: cid,
		PromptVersions: []string{"pv_sys", "pv_voice"}}, nil)
	s.client(cid, 2, &protocol.UserMessage{ID: "am_u2", ConversationID: cid, Content: "again", PreviousID: ptr("am_a1")}, nil)
	seq := s.server(cid, &protocol.StartAnswer{ID: "am_a2", PreviousID: "am_u2", ConversationID: cid}, nil)
	s.applied(bus.StreamConversations, seq)
	var pvs []string
	if err := s.pool.QueryRow(context.Background(), `SELECT prompt_versions FROM alicia_messages WHERE id = 'am_a1'`).Scan(&pvs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pvs, []string{"pv_sys", "pv_voice"}) {
		t.Fatalf("prompt_versions %v, want [pv_sys pv_voice]", pvs)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE prompt_versions IS NULL AND id IN ('am_u1', 'am_u2', 'am_a2')`); n != 3 {
		t.Fatalf("%d of the messages without versions have a NULL prompt_versions, want 3", n)
	}
	// The version's messages are found by the GIN-indexed containment.
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE prompt_versions @> ARRAY['pv_voice']`); n != 1 {
		t.Fatalf("%d messages shaped by pv_voice, want 1", n)
	}
}

package prompts_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
)

func pv(id, component, user string, status protocol.PromptVersionStatus, share *float64) *protocol.PromptVersion {
	p := &protocol.PromptVersion{ID: id, Component: component, Version: 1, Text: "text " + id, Status: status, RolloutShare: share, CreatedBy: "seed"}
	if user != "" {
		p.UserID = &user
	}
	return p
}

// The catalog applies envelopes by persistence's rules: a full activation
// replaces the scope's versions, a rollout sits beside the full one, a
// person's beats the installation's for that person only.
func TestCatalogChooses(t *testing.T) {
	c := prompts.NewCatalog(map[string]string{prompts.System: "seed text"})
	active, retired := protocol.PromptVersionStatusActive, protocol.PromptVersionStatusRetired
	text := func(cid, user string) string { s, _, _ := c.For(cid, user).Text(prompts.System); return s }
	if got := text("ac_1", ""); got != "seed text" {
		t.Fatalf("no versions: %q, want the seed", got)
	}
	c.Apply(pv("pv_a", prompts.System, "", active, nil))
	c.Apply(pv("pv_u", prompts.System, "u1", active, nil))
	if text("ac_1", "u1") != "text pv_u" || text("ac_1", "u2") != "text pv_a" {
		t.Fatalf("scopes: u1 %q, u2 %q", text("ac_1", "u1"), text("ac_1", "u2"))
	}
	zero, all := 0.0, 0.999999
	c.Apply(pv("pv_r", prompts.System, "", active, &zero))
	if text("ac_1", "u2") != "text pv_a" {
		t.Fatalf("a rollout at 0 served a conversation")
	}
	c.Apply(pv("pv_r", prompts.System, "", active, &all))
	if text("ac_1", "u2") != "text pv_r" || text("ac_1", "u1") != "text pv_u" {
		t.Fatalf("a rollout at ~1: u2 %q, u1 %q", text("ac_1", "u2"), text("ac_1", "u1"))
	}
	c.Apply(pv("pv_r", prompts.System, "", retired, nil))
	c.Apply(pv("pv_u", prompts.System, "u1", retired, nil))
	if text("ac_1", "u2") != "text pv_a" || text("ac_1", "u1") != "text pv_a" {
		t.Fatalf("after retiring: u2 %q, u1 %q", text("ac_1", "u2"), text("ac_1", "u1"))
	}
	c.Apply(pv("pv_b", prompts.System, "", active, nil))
	if _, id, _ := c.For("ac_1", "").Text(prompts.System); id != "pv_b" {
		t.Fatalf("a full activation: %s serves, want pv_b", id)
	}
}

// Seed publishes a new component's version 1, nothing for a text already
// there, and the next version for a changed text.
func TestSeed(t *testing.T) {
	var got []*protocol.PromptVersion
	publish := func(_ context.Context, v *protocol.PromptVersion, msgID string) error {
		if msgID != v.ID {
			t.Errorf("msg id %q, want the version id %q", msgID, v.ID)
		}
		got = append(got, v)
		return nil
	}
	old := prompts.Version{ID: "pv_old", Component: prompts.System, Text: "old", Version: 3, Status: protocol.PromptVersionStatusRetired}
	same := prompts.Version{ID: "pv_tool", Component: "tool:calc", Text: "adds", Version: 1}
	n, err := prompts.Seed(context.Background(), map[string]string{prompts.System: "new", "tool:calc": "adds", prompts.VoiceStyle: "speak"},
		[]prompts.Version{old, same}, publish, time.Unix(1, 0))
	if err != nil || n != 2 {
		t.Fatalf("published %d, %v; want 2", n, err)
	}
	want := map[string]int32{prompts.System: 4, prompts.VoiceStyle: 1}
	for _, v := range got {
		if want[v.Component] != v.Version || v.Status != protocol.PromptVersionStatusActive || v.CreatedBy != "seed" || v.ID != prompts.SeedID(v.Component, v.Text) {
			t.Errorf("seed %+v", v)
		}
	}
}

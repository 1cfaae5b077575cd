package promptcmd_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
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

// TestPromptsAgainstTheGateway lists, promotes at a share, promotes to all
// and rolls back a person's versions through the real gateway; another
// person's version is refused.
func TestPromptsAgainstTheGateway(t *testing.T) {
	s := stacktest.Start(t)
	ctx := context.Background()
	alice := client(t, s.Base, stacktest.AliceKey)
	for _, pv := range []*protocol.PromptVersion{
		{ID: "pv_cli_a1", Component: "system", Version: 1, Text: "Answer in one sentence.", UserID: protocol.Ptr("alice"),
			Status: protocol.PromptVersionStatusActive, CreatedBy: "seed", CreatedAt: time.Now().UnixMilli()},
		{ID: "pv_cli_a2", Component: "system", Version: 2, Text: "Answer in one sentence,\nwith units.", UserID: protocol.Ptr("alice"),
			Status: protocol.PromptVersionStatusCandidate, CreatedBy: "run:r1", CreatedAt: time.Now().UnixMilli()},
		{ID: "pv_cli_b1", Component: "system", Version: 1, Text: "Bob's.", UserID: protocol.Ptr("bob"),
			Status: protocol.PromptVersionStatusCandidate, CreatedBy: "run:r2", CreatedAt: time.Now().UnixMilli()},
	} {
		if _, err := s.Pub.PublishSystem(ctx, protocol.New("", pv), ""); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	testkit.Eventually(t, 10*time.Second, func() bool {
		out.Reset()
		return promptcmd.List(ctx, alice, "system", "mine", false, &out) == nil && strings.Contains(out.String(), "pv_cli_a2")
	}, "alice's versions listed; last output:\n%s", &out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "pv_cli_a2") || !strings.Contains(lines[1], "candidate") ||
		!strings.Contains(lines[1], "Answer in one sentence, with units.") || !strings.Contains(lines[2], "active") || strings.Contains(out.String(), "pv_cli_b1") {
		t.Fatalf("list:\n%s", out.String())
	}

	half := 0.5
	out.Reset()
	if err := promptcmd.Promote(ctx, alice, "pv_cli_a2", &half, &out); err != nil || !strings.Contains(out.String(), "50% of new conversations") {
		t.Fatalf("promote at a share: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := promptcmd.List(ctx, alice, "system", "mine", false, &out); err != nil || !strings.Contains(out.String(), "active (50%)") {
		t.Fatalf("after a rollout: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := promptcmd.Rollback(ctx, alice, "system", "mine", &out); err != nil || !strings.Contains(out.String(), "pv_cli_a1 serves system") {
		t.Fatalf("rollback of the rollout: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := promptcmd.Promote(ctx, alice, "pv_cli_a2", nil, &out); err != nil || !strings.Contains(out.String(), "now serves all new conversations") {
		t.Fatalf("promote: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := promptcmd.List(ctx, alice, "system", "mine", false, &out); err != nil || !strings.Contains(out.String(), "retired") {
		t.Fatalf("after promotion the previous one is retired: %v\n%s", err, out.String())
	}

	var apiErr *api.Error
	if err := promptcmd.Promote(ctx, alice, "pv_cli_b1", nil, &out); !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Fatalf("promoting bob's version: %v, want 403", err)
	}
	if err := promptcmd.Rollback(ctx, alice, "system", "installation", &out); !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Fatalf("alice rolling back the installation's: %v, want 403", err)
	}
	if err := promptcmd.Promote(ctx, alice, "pv_cli_a1", protocol.Ptr(1.5), &out); err == nil {
		t.Fatal("a share above 1 was sent")
	}
}

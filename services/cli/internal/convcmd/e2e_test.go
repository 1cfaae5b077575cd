package convcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/convcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/stacktest"
)

// TestAgainstTheGateway runs new, list, show and delete against the real
// gateway (with NATS, Postgres and persistence).
func TestAgainstTheGateway(t *testing.T) {
	s := stacktest.Start(t)
	ctx := context.Background()
	alice, bob := client(t, s.Base, stacktest.AliceKey), client(t, s.Base, stacktest.BobKey)

	var out bytes.Buffer
	if err := convcmd.New(ctx, alice, "Groceries", &out); err != nil {
		t.Fatal(err)
	}
	cid := strings.TrimSpace(out.String())
	if !strings.HasPrefix(cid, "ac_") {
		t.Fatalf("new printed %q", out.String())
	}

	// A turn, as the WebSocket and the llm would publish it.
	user := protocol.New(cid, &protocol.UserMessage{ID: "am_e2e_u", ConversationID: cid, Content: "Milk and eggs?"})
	user.StanzaID, user.Meta = 1, map[string]any{edge.MetaUserID: "alice"}
	if _, err := s.Pub.PublishClient(ctx, user); err != nil {
		t.Fatal(err)
	}
	for _, body := range []protocol.Body{
		&protocol.StartAnswer{ID: "am_e2e_a", PreviousID: "am_e2e_u", ConversationID: cid},
		&protocol.AssistantSentence{PreviousID: "am_e2e_a", ConversationID: cid, Sequence: 1, Text: "Both are on the list."},
		&protocol.AssistantSentence{PreviousID: "am_e2e_a", ConversationID: cid, Sequence: 2, Text: "Anything else?", IsFinal: protocol.Ptr(true)},
	} {
		if _, err := s.Pub.PublishServer(ctx, protocol.New(cid, body), ""); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		out.Reset()
		err := convcmd.Show(ctx, alice, convcmd.ShowOptions{ID: cid}, &out)
		// The message count is the conversation row's, which persistence may update a batch after the messages.
		return err == nil && strings.Contains(out.String(), "alicia> Both are on the list. Anything else?") &&
			strings.Contains(out.String(), "2 messages")
	}, "the answer in `alicia show`; last output:\n%s", &out)
	if !strings.Contains(out.String(), cid+"  Groceries  (active, 2 messages") || !strings.Contains(out.String(), "you> Milk and eggs?") {
		t.Fatalf("show:\n%s", out.String())
	}
	out.Reset()
	if err := convcmd.Show(ctx, alice, convcmd.ShowOptions{ID: cid, JSON: true}, &out); err != nil {
		t.Fatal(err)
	}
	var detail api.ConversationDetail
	if err := json.Unmarshal(out.Bytes(), &detail); err != nil || len(detail.Messages) != 2 || detail.Messages[1].PreviousID == nil || *detail.Messages[1].PreviousID != "am_e2e_u" {
		t.Fatalf("show --json = %s (%v)", out.String(), err)
	}

	out.Reset()
	if err := convcmd.List(ctx, alice, convcmd.ListOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], cid) ||
		!strings.Contains(lines[1], "Groceries") || !strings.HasSuffix(lines[1], " 2") {
		t.Fatalf("list:\n%s", out.String())
	}
	out.Reset()
	if err := convcmd.List(ctx, bob, convcmd.ListOptions{}, &out); err != nil || strings.TrimSpace(out.String()) != "No conversations." {
		t.Fatalf("bob's list: %q, %v", out.String(), err)
	}
	if err := convcmd.Show(ctx, bob, convcmd.ShowOptions{ID: cid}, &out); api.StatusOf(err) != 403 {
		t.Fatalf("bob's show: %v, want 403", err)
	}

	out.Reset()
	if err := convcmd.Delete(ctx, alice, cid, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := convcmd.List(ctx, alice, convcmd.ListOptions{Status: "all"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), cid) {
		t.Fatalf("deleted conversation listed:\n%s", out.String())
	}
	err := convcmd.Show(ctx, alice, convcmd.ShowOptions{ID: cid}, &out)
	if api.StatusOf(err) != 404 || !strings.Contains(err.Error(), "404 Not Found") {
		t.Fatalf("show after delete: %v, want 404", err)
	}
}

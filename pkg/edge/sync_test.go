package edge_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// deletable authorizes user-1 on ac_deletable until the conversation is deleted.
type deletable struct{ deleted atomic.Bool }

func (d *deletable) Authorize(_ context.Context, user, cid string) error {
	if cid != "ac_deletable" || d.deleted.Load() {
		return edge.ErrNotFound
	}
	return nil
}

// TestSyncIntoADeletedConversation: a SyncRequest for a conversation
// deleted since the connection was bound stores nothing and answers every
// message conflict "deleted", with what to do.
func TestSyncIntoADeletedConversation(t *testing.T) {
	js, _ := setup(t)
	c := &client{}
	auth := &deletable{}
	s := start(t, js, auth, c, "user-1", 64)
	ctx := context.Background()
	cid := "ac_deletable"
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: &cid}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 1 }, "no Configuration reply")
	auth.deleted.Store(true)
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 2, ConversationID: cid, Type: protocol.TypeSyncRequest, Body: &protocol.SyncRequest{
		Messages: []protocol.SyncRequestMessagesElem{
			{LocalID: "l2", Role: "user", Contents: "two", SequenceNumber: 2, CreatedAt: 2},
			{LocalID: "l1", Role: "user", Contents: "one", SequenceNumber: 1, CreatedAt: 1},
		}}}))
	var resp *protocol.SyncResponse
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, e := range c.got() {
			if r, ok := e.Body.(*protocol.SyncResponse); ok {
				resp = r
				return true
			}
		}
		return false
	}, "no SyncResponse")
	if len(resp.SyncedMessages) != 2 {
		t.Fatalf("SyncResponse %+v", resp)
	}
	for i, m := range resp.SyncedMessages {
		want := []string{"l1", "l2"}[i] // sequenceNumber order
		if m.LocalID != want || m.Status != protocol.SyncResponseSyncedMessagesElemStatusConflict || m.Conflict["reason"] != edge.ConflictDeleted ||
			m.Conflict["message"] == "" || m.ServerID != protocol.SyncedMessageID(cid, want) {
			t.Fatalf("syncedMessages[%d] = %+v, want %s conflict deleted", i, m, want)
		}
	}
	for _, e := range c.got() {
		if e.Type == protocol.TypeUserMessage {
			t.Fatal("a message was published into a deleted conversation")
		}
	}
}

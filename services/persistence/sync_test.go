package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestSyncedMessages: a SyncRequest alone makes no row (the edge publishes
// its messages as UserMessages); a UserMessage with a localId is stored with
// local_id, server_id and synced_at, chained like any message; the same
// message again changes nothing.
func TestSyncedMessages(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := "ac_synced"
	s.client(cid, 1, &protocol.Configuration{}, asUser1)
	s.applied(bus.StreamConversations, s.client(cid, 2, &protocol.SyncRequest{Messages: []protocol.SyncRequestMessagesElem{
		{LocalID: "l1", Role: "user", Contents: "written offline", SequenceNumber: 1, CreatedAt: 1700000000000}}}, asUser1))
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE conversation_id = 'ac_synced'`); n != 0 {
		t.Fatalf("a SyncRequest made %d rows, want none", n)
	}
	first, second := protocol.SyncedMessageID(cid, "l1"), protocol.SyncedMessageID(cid, "l2")
	s.client(cid, 3, &protocol.UserMessage{ID: first, ConversationID: cid, Content: "written offline", LocalID: ptr("l1")}, asUser1)
	seq := s.client(cid, 4, &protocol.UserMessage{ID: second, PreviousID: &first, ConversationID: cid, Content: "and again", LocalID: ptr("l2")}, asUser1)
	s.applied(bus.StreamConversations, seq)
	type row struct {
		id, local, server, status, prev string
		seq                             int
		synced                          *time.Time
	}
	rows := func() []row {
		t.Helper()
		rs, err := s.pool.Query(context.Background(), `SELECT id, COALESCE(local_id, ''), COALESCE(server_id, ''), sync_status::text,
			COALESCE(previous_id, ''), sequence_number, synced_at FROM alicia_messages WHERE conversation_id = $1 ORDER BY sequence_number`, cid)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var out []row
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.id, &r.local, &r.server, &r.status, &r.prev, &r.seq, &r.synced); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	got := rows()
	if len(got) != 2 || got[0].id != first || got[1].id != second || got[1].prev != first || got[0].seq != 1 || got[1].seq != 2 {
		t.Fatalf("rows %+v, want %s then %s chained", got, first, second)
	}
	for i, r := range got {
		if r.local != []string{"l1", "l2"}[i] || r.server != r.id || r.status != "synced" || r.synced == nil {
			t.Fatalf("row %+v: want local_id, server_id = id, synced, synced_at", r)
		}
	}
	// The same message again (a redelivery, a second sync): nothing changes.
	s.applied(bus.StreamConversations, s.client(cid, 5, &protocol.UserMessage{ID: first, ConversationID: cid, Content: "written offline", LocalID: ptr("l1")}, asUser1))
	if again := rows(); len(again) != 2 || !again[0].synced.Equal(*got[0].synced) {
		t.Fatalf("after the same message again: %+v", again)
	}
}

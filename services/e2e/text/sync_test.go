package text_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway"
)

// syncRow is a message row of the conversation, in branch order.
type syncRow struct {
	id, prev, role, contents, local, status string
	syncedAt                                bool
}

func (s *stack) branchRows(ctx context.Context, cid string) ([]syncRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, COALESCE(previous_id, ''), message_role::text, contents, COALESCE(local_id, ''),
		sync_status::text, synced_at IS NOT NULL FROM alicia_messages WHERE conversation_id = $1 ORDER BY sequence_number, created_at`, cid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []syncRow
	for rows.Next() {
		var r syncRow
		if err := rows.Scan(&r.id, &r.prev, &r.role, &r.contents, &r.local, &r.status, &r.syncedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// syncUntilResponse sends a SyncRequest and reads until its SyncResponse,
// returning what came before it too.
func (c *client) syncUntilResponse(msgs ...protocol.SyncRequestMessagesElem) ([]protocol.Envelope, *protocol.SyncResponse) {
	c.t.Helper()
	c.send(&protocol.SyncRequest{Messages: msgs})
	envs, last := c.collect(func(e protocol.Envelope) bool {
		if em, ok := e.Body.(*protocol.ErrorMessage); ok {
			c.t.Fatalf("ErrorMessage %d: %s", em.Code, em.Message)
		}
		return e.Type == protocol.TypeSyncResponse
	})
	return envs, last.Body.(*protocol.SyncResponse)
}

// TestOfflineMessagesAreSyncedAndAnsweredInOrder: three messages written
// offline, sent in one SyncRequest (out of order in the array), are stored
// in sequenceNumber order on one branch — each after the answer to the one
// before — with local_id and sync_status, answered in order, and reported
// synced in a SyncResponse. The same SyncRequest again (its SyncResponse
// lost) makes no row and no turn and reports the server's copies; a message
// that follows a message this conversation does not have is a conflict.
func TestOfflineMessagesAreSyncedAndAnsweredInOrder(t *testing.T) {
	s := newStack(t, options{gateway: func(c *gateway.Config) { c.Quotas.Budgets.MessageChars = 40 }})
	for _, w := range []string{"one", "two", "three", "online", "later"} {
		s.chat.On(fakeopenai.LastUserContains("message "+w), fakeopenai.Text("Answer to "+w+"."))
	}
	c := s.open(t, aliceKey, "", 0)
	hello := c.say("the message online")
	start0, _, _ := c.answer(hello)

	at := int64(1_700_000_000_000)
	msgs := []protocol.SyncRequestMessagesElem{
		{LocalID: "local-3", PreviousID: protocol.Ptr("local-2"), Role: "user", Contents: "message three", SequenceNumber: 3, CreatedAt: at + 3000},
		{LocalID: "local-1", PreviousID: &start0.ID, Role: "user", Contents: "message one", SequenceNumber: 1, CreatedAt: at + 1000},
		{LocalID: "local-2", PreviousID: protocol.Ptr("local-1"), Role: "user", Contents: "message two", SequenceNumber: 2, CreatedAt: at + 2000},
	}
	ids := []string{protocol.SyncedMessageID(c.cid, "local-1"), protocol.SyncedMessageID(c.cid, "local-2"), protocol.SyncedMessageID(c.cid, "local-3")}
	envs, resp := c.syncUntilResponse(msgs...)
	// The client is shown each message with its server id, then its answer starts.
	var order []string
	for _, e := range envs {
		switch b := e.Body.(type) {
		case *protocol.UserMessage:
			if b.LocalID == nil {
				t.Fatalf("UserMessage %s without localId", b.ID)
			}
			order = append(order, "user:"+b.ID)
		case *protocol.StartAnswer:
			order = append(order, "answer:"+b.PreviousID)
		}
	}
	want := []string{"user:" + ids[0], "answer:" + ids[0], "user:" + ids[1], "answer:" + ids[1], "user:" + ids[2]}
	if !slices.Equal(order, want) && !slices.Equal(order, append(slices.Clone(want), "answer:"+ids[2])) {
		t.Fatalf("before the SyncResponse: %q, want %q", order, want)
	}
	if resp.SyncedAt <= 0 || len(resp.SyncedMessages) != 3 {
		t.Fatalf("SyncResponse %+v", resp)
	}
	for i, m := range resp.SyncedMessages {
		if m.LocalID != fmt.Sprintf("local-%d", i+1) || m.ServerID != ids[i] || m.Status != protocol.SyncResponseSyncedMessagesElemStatusSynced {
			t.Fatalf("syncedMessages[%d] = %+v, want local-%d synced as %s", i, m, i+1, ids[i])
		}
	}
	c.answer(ids[2])

	// One branch in order: the online turn, then each offline message and its answer.
	var rows []syncRow
	s.eventually("rows in order", func(ctx context.Context) error {
		var err error
		if rows, err = s.branchRows(ctx, c.cid); err != nil {
			return err
		}
		if len(rows) != 8 {
			return fmt.Errorf("%d rows, want 8", len(rows))
		}
		for i := 1; i < len(rows); i++ {
			if rows[i].prev != rows[i-1].id {
				return fmt.Errorf("row %d (%s) follows %s, want %s", i, rows[i].id, rows[i].prev, rows[i-1].id)
			}
		}
		for k, w := range []string{"one", "two", "three"} {
			u, a := rows[2+2*k], rows[3+2*k]
			if u.id != ids[k] || u.role != "user" || u.contents != "message "+w || u.local != fmt.Sprintf("local-%d", k+1) || u.status != "synced" || !u.syncedAt {
				return fmt.Errorf("offline message %d: %+v", k+1, u)
			}
			if a.role != "assistant" || a.contents != "Answer to "+w+"." {
				return fmt.Errorf("answer %d: %+v", k+1, a)
			}
		}
		return nil
	})
	requests := len(s.chat.Requests())

	// The same SyncRequest again (its SyncResponse lost): no row, no turn,
	// the server's copies.
	envs, resp = c.syncUntilResponse(msgs...)
	for _, e := range envs {
		if e.Type == protocol.TypeUserMessage || e.Type == protocol.TypeStartAnswer {
			t.Fatalf("a synced message sent again made a %s", e.Type)
		}
	}
	for i, m := range resp.SyncedMessages {
		if m.Status != protocol.SyncResponseSyncedMessagesElemStatusSynced || m.ServerID != ids[i] || m.Message["id"] != ids[i] ||
			m.Message["content"] != msgs[(i+1)%3].Contents {
			t.Fatalf("again: syncedMessages[%d] = %+v", i, m)
		}
	}
	// A conflicting message (it follows a message this conversation does
	// not have), an empty one and one too long beside one that applies (it follows a
	// message synced before, named by its localId).
	_, resp = c.syncUntilResponse(
		protocol.SyncRequestMessagesElem{LocalID: "local-4", PreviousID: protocol.Ptr("am_nosuchmessage0000"), Role: "user", Contents: "message lost", SequenceNumber: 4, CreatedAt: at + 4000},
		protocol.SyncRequestMessagesElem{LocalID: "local-5", Role: "user", Contents: "  ", SequenceNumber: 5, CreatedAt: at + 5000},
		protocol.SyncRequestMessagesElem{LocalID: "local-7", Role: "user", Contents: strings.Repeat("long ", 10), SequenceNumber: 5, CreatedAt: at + 5500},
		protocol.SyncRequestMessagesElem{LocalID: "local-6", PreviousID: protocol.Ptr("local-3"), Role: "user", Contents: "message later", SequenceNumber: 6, CreatedAt: at + 6000},
	)
	got := resp.SyncedMessages
	if got[0].Status != protocol.SyncResponseSyncedMessagesElemStatusConflict || got[0].Conflict["reason"] != "unknown_previous" ||
		got[0].Conflict["previousId"] != "am_nosuchmessage0000" || got[0].Conflict["message"] == "" {
		t.Fatalf("conflicting message: %+v", got[0])
	}
	if got[1].Status != protocol.SyncResponseSyncedMessagesElemStatusConflict || got[1].Conflict["reason"] != "empty" {
		t.Fatalf("empty message: %+v", got[1])
	}
	if got[2].Status != protocol.SyncResponseSyncedMessagesElemStatusConflict || got[2].Conflict["reason"] != "too_long" {
		t.Fatalf("a message over ALICIA_BUDGET_MESSAGE_CHARS: %+v", got[2])
	}
	if got[3].Status != protocol.SyncResponseSyncedMessagesElemStatusSynced {
		t.Fatalf("the applicable message: %+v", got[3])
	}
	c.answer(got[3].ServerID)
	// The second sync made no turn: the model was asked once more, for "later".
	if n := len(s.chat.Requests()); n != requests+1 {
		t.Fatalf("the model was asked %d more times, want 1 (only the message that applied)", n-requests)
	}
	s.eventually("no row for the conflicts", func(ctx context.Context) error {
		rows, err := s.branchRows(ctx, c.cid)
		if err != nil {
			return err
		}
		if len(rows) != 10 || rows[8].local != "local-6" || rows[8].prev != rows[7].id {
			return fmt.Errorf("%d rows (want 10, the 9th local-6 after the 8th): %+v", len(rows), rows[8:])
		}
		return nil
	})
}

// TestAcknowledgements: a client that lists "acknowledgements" gets an
// Acknowledgement for each envelope once JetStream stored it, success false
// after the ErrorMessage for one refused; a client that does not list it
// gets none.
func TestAcknowledgements(t *testing.T) {
	s := newStack(t, options{})
	c := s.dial(t, aliceKey)
	c.send(&protocol.Configuration{Features: []protocol.ConfigurationFeaturesElem{"streaming", "acknowledgements"}})
	envs, reply := c.collect(func(e protocol.Envelope) bool { return e.Type == protocol.TypeConfiguration })
	c.cid = reply.ConversationID
	i := slices.IndexFunc(envs, func(e protocol.Envelope) bool { return e.Type == protocol.TypeAcknowledgement })
	if i < 0 {
		t.Fatalf("before the Configuration's answer: %s, want its Acknowledgement", typesOf(envs))
	}
	if a := envs[i].Body.(*protocol.Acknowledgement); a.AcknowledgedStanzaID != 1 || !a.Success || a.ConversationID != c.cid {
		t.Fatalf("Configuration's Acknowledgement %+v", a)
	}
	stanza := c.next
	uid := c.say("hello")
	ack := c.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeAcknowledgement })
	if a := ack.Body.(*protocol.Acknowledgement); a.AcknowledgedStanzaID != stanza || !a.Success || ack.StanzaID != 0 {
		t.Fatalf("UserMessage's Acknowledgement %+v (stanza %d), want stanza %d success", a, ack.StanzaID, stanza)
	}
	c.answer(uid)
	// Refused (a client may not send an AssistantSentence): the
	// ErrorMessage, then success false.
	stanza = c.next
	c.send(&protocol.AssistantSentence{PreviousID: uid, ConversationID: c.cid, Sequence: 1, Text: "forged"})
	em := c.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeErrorMessage })
	if b := em.Body.(*protocol.ErrorMessage); b.Code != protocol.CodeForbidden {
		t.Fatalf("ErrorMessage %+v", b)
	}
	env, err := c.recv(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := env.Body.(*protocol.Acknowledgement); !ok || a.AcknowledgedStanzaID != stanza || a.Success {
		t.Fatalf("after the refusal %s %+v, want Acknowledgement of %d, success false", env.Type, env.Body, stanza)
	}

	// Without the feature: a whole turn and no Acknowledgement.
	plain := s.open(t, aliceKey, "", 0)
	uid = plain.say("hello again")
	_, _, envs = plain.answer(uid)
	for _, e := range envs {
		if e.Type == protocol.TypeAcknowledgement {
			t.Fatal("an Acknowledgement for a client that did not ask for them")
		}
	}
}

// TestSyncedMessageFollowsTheAnswerStillToCome: when the branch ends with a
// message whose answer has not started (sent while the answer before it
// streamed), a synced message waits for that answer and follows it, so the
// branch stays one line: message, answer, message, answer, synced message,
// answer.
func TestSyncedMessageFollowsTheAnswerStillToCome(t *testing.T) {
	s := newStack(t, options{})
	s.chat.On(fakeopenai.LastUserContains("slow first"), fakeopenai.Turn{Text: []string{"One", " two", " three", " four", " five."}})
	c := s.open(t, aliceKey, "", 0)
	s.chat.SetFault(fakeopenai.Fault{ChunkDelay: 200 * time.Millisecond})
	first := c.say("slow first")
	start := c.until(func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.StartAnswer)
		return ok && b.PreviousID == first
	}).Body.(*protocol.StartAnswer)
	// Sent while the first answer streams: it follows that answer, and its
	// own turn waits for it.
	second := protocol.NewID("am")
	c.send(&protocol.UserMessage{ID: second, PreviousID: &start.ID, ConversationID: c.cid, Content: "queued second"})
	envs, resp := c.syncUntilResponse(protocol.SyncRequestMessagesElem{LocalID: "late", PreviousID: &second, Role: "user",
		Contents: "synced third", SequenceNumber: 1, CreatedAt: time.Now().UnixMilli()})
	s.chat.SetFault(fakeopenai.Fault{})
	if len(resp.SyncedMessages) != 1 || resp.SyncedMessages[0].Status != protocol.SyncResponseSyncedMessagesElemStatusSynced {
		t.Fatalf("SyncResponse %+v", resp)
	}
	third := resp.SyncedMessages[0].ServerID
	var secondAnswer string
	for _, e := range envs {
		if b, ok := e.Body.(*protocol.StartAnswer); ok && b.PreviousID == second {
			secondAnswer = b.ID
		}
		if b, ok := e.Body.(*protocol.UserMessage); ok && b.ID == third {
			if secondAnswer == "" || b.PreviousID == nil || *b.PreviousID != secondAnswer {
				t.Fatalf("the synced message follows %v, want the second message's answer %q (started before it)", b.PreviousID, secondAnswer)
			}
		}
	}
	c.answer(third)
	s.eventually("one branch", func(ctx context.Context) error {
		rows, err := s.branchRows(ctx, c.cid)
		if err != nil {
			return err
		}
		if len(rows) != 6 {
			return fmt.Errorf("%d rows, want 6", len(rows))
		}
		for i := 1; i < len(rows); i++ {
			if rows[i].prev != rows[i-1].id {
				return fmt.Errorf("row %d (%s %q) follows %s, want %s", i, rows[i].role, rows[i].contents, rows[i].prev, rows[i-1].id)
			}
		}
		if rows[4].id != third || rows[4].local != "late" {
			return fmt.Errorf("the fifth row %+v, want the synced message", rows[4])
		}
		return nil
	})
}

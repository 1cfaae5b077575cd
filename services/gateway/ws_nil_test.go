package gateway_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// field is one key of a MessagePack map written the way @msgpack/msgpack
// does with its defaults: keys in insertion order, an unset optional field
// as the key with a nil value.
type field struct {
	key   string
	value any // nil, string, int or []field
}

func jsMsgpack(t *testing.T, m []field) []byte {
	t.Helper()
	var b []byte
	str := func(s string) {
		if len(s) > 255 {
			t.Fatalf("string too long for this encoder: %d bytes", len(s))
		}
		if len(s) < 32 {
			b = append(b, 0xa0|byte(len(s)))
		} else {
			b = append(b, 0xd9, byte(len(s)))
		}
		b = append(b, s...)
	}
	var write func(m []field)
	write = func(m []field) {
		if len(m) > 15 {
			t.Fatalf("map too large for this encoder: %d keys", len(m))
		}
		b = append(b, 0x80|byte(len(m)))
		for _, f := range m {
			str(f.key)
			switch v := f.value.(type) {
			case nil:
				b = append(b, 0xc0)
			case string:
				str(v)
			case int:
				if v < 0 || v > 1<<32-1 {
					t.Fatalf("int %d out of range for this encoder", v)
				}
				b = append(b, 0xce)
				b = binary.BigEndian.AppendUint32(b, uint32(v)) // not the smallest form: readers take any
			case []field:
				write(v)
			default:
				t.Fatalf("%s: cannot encode %T", f.key, v)
			}
		}
	}
	write(m)
	return b
}

func (w *wsClient) writeRaw(frame []byte) {
	w.t.Helper()
	if err := w.c.Write(context.Background(), websocket.MessageBinary, frame); err != nil {
		w.t.Fatal(err)
	}
}

// TestWebSocketNilOptionals: a JavaScript client sends its unset optional
// fields as nil. Its Configuration starts a conversation, its first
// UserMessage (previousId nil) is stored and answered, not refused; a
// required field sent as nil is still refused with 103.
func TestWebSocketNilOptionals(t *testing.T) {
	s := newStack(t)
	alice := s.dial(t, aliceKey)

	alice.writeRaw(jsMsgpack(t, []field{
		{"type", int(protocol.TypeConfiguration)},
		{"stanzaId", 1},
		{"conversationId", nil},
		{"meta", nil},
		{"body", []field{{"conversationId", nil}, {"lastSequenceSeen", nil}, {"clientVersion", "web/0.4.1"}, {"features", nil}}},
	}))
	reply := alice.recv()
	cfg, ok := reply.Body.(*protocol.Configuration)
	if !ok || cfg.ConversationID == nil {
		t.Fatalf("reply = %+v, want the Configuration of a new conversation", reply)
	}
	cid := *cfg.ConversationID

	alice.writeRaw(jsMsgpack(t, []field{
		{"type", int(protocol.TypeUserMessage)},
		{"stanzaId", 2},
		{"conversationId", cid},
		{"body", []field{{"id", "am_first"}, {"previousId", nil}, {"conversationId", cid}, {"content", "hello"}, {"timestamp", nil}}},
	}))
	testkit.Eventually(t, 10*time.Second, func() bool {
		var owner string
		var previous *string
		err := s.pool.QueryRow(context.Background(), `SELECT c.user_id, m.previous_id FROM alicia_messages m
			JOIN alicia_conversations c ON c.id = m.conversation_id WHERE m.id = 'am_first'`).Scan(&owner, &previous)
		return err == nil && owner == "alice" && previous == nil
	}, "the first message (previousId nil) was not stored under alice without a previous message")

	// The answer comes through the stream after the message was handled,
	// so an ErrorMessage for it would have reached the client first.
	ack, err := s.pub.PublishServer(context.Background(), protocol.New(cid, &protocol.StartAnswer{ID: "am_ans", PreviousID: "am_first", ConversationID: cid}), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := alice.recv(); got.Type != protocol.TypeStartAnswer || got.StanzaID != -int32(ack.Sequence) {
		t.Fatalf("got %+v (%+v), want the StartAnswer", got, got.Body)
	}

	alice.writeRaw(jsMsgpack(t, []field{
		{"type", int(protocol.TypeUserMessage)},
		{"stanzaId", 3},
		{"body", []field{{"id", nil}, {"previousId", "am_first"}, {"conversationId", cid}, {"content", "no id"}}},
	}))
	got := alice.recv()
	e, ok := got.Body.(*protocol.ErrorMessage)
	if !ok || e.Code != protocol.CodeInvalidBody || !strings.Contains(e.Message, "body/id") {
		t.Fatalf("got %+v (%+v), want ErrorMessage 103 naming body/id", got, got.Body)
	}
}

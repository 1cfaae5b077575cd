package persistence_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

func TestBadInputIsDeadLettered(t *testing.T) {
	s := newStack(t)
	s.start()
	const cid = "ac_bad"
	ctx := context.Background()
	subject := subjects.Client(cid, protocol.TypeUserMessage)

	valid, err := protocol.Encode(protocol.Envelope{StanzaID: 1, ConversationID: cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: "am_ok", ConversationID: cid, Content: "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	mp := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		data []byte
		code int32
	}{
		{"truncated msgpack", valid[:len(valid)/2], protocol.CodeMalformed},
		{"wrong header types", mp(map[string]any{"stanzaId": "one", "conversationId": cid, "type": "user_message", "body": map[string]any{}}), protocol.CodeMalformed},
		{"unknown type", mp(map[string]any{"stanzaId": 2, "conversationId": cid, "type": 999, "body": map[string]any{}}), protocol.CodeUnknownType},
		{"body of wrong types", mp(map[string]any{"stanzaId": 3, "conversationId": cid, "type": 2, "body": map[string]any{"id": 7, "conversationId": cid, "content": true}}), protocol.CodeInvalidBody},
		{"oversized", mp(map[string]any{"stanzaId": 4, "conversationId": cid, "type": 2, "body": map[string]any{"id": "am_big", "conversationId": cid, "content": strings.Repeat("x", protocol.MaxEnvelopeSize)}}), protocol.CodeTooLarge},
	}
	for _, c := range cases {
		if _, err := s.js.Publish(ctx, subject, c.data); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	ack, err := s.js.Publish(ctx, subject, valid)
	if err != nil {
		t.Fatal(err)
	}
	h := s.history(cid, ack.Sequence)
	if len(h.Messages) != 1 || h.Messages[0].ID != "am_ok" {
		t.Fatalf("history = %+v, want only the valid message", h.Messages)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages`); n != 1 {
		t.Fatalf("%d messages written, want 1", n)
	}

	dlq, err := s.js.OrderedConsumer(ctx, bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("dead letter %d: %v", i, err)
			}
			h := m.Headers()
			if got := h.Get(bus.HeaderDLQCode); got != strconv.Itoa(int(c.code)) {
				t.Errorf("code = %q, want %d (reason %q)", got, c.code, h.Get(bus.HeaderDLQReason))
			}
			if h.Get(bus.HeaderDLQReason) == "" || h.Get(bus.HeaderDLQSubject) != subject || h.Get(bus.HeaderDLQSequence) == "" {
				t.Errorf("headers = %v", h)
			}
			if string(m.Data()) != string(c.data) {
				t.Errorf("dead letter holds %d bytes, want the original %d", len(m.Data()), len(c.data))
			}
		})
	}
}

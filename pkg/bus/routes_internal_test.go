package bus

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// BenchmarkRouteDispatch: what a route table adds to a message over a
// hand-written handler doing the same work (subject parse, decode, type
// assertion), without NATS: ns per message.
func BenchmarkRouteDispatch(b *testing.B) {
	subject := subjects.Client("ac_bench", protocol.TypeControlStop)
	data, err := protocol.Encode(protocol.New("ac_bench", &protocol.ControlStop{ConversationID: "ac_bench"}))
	if err != nil {
		b.Fatal(err)
	}
	m := &nats.Msg{Subject: subject, Data: data}
	var handled int
	b.Run("routes", func(b *testing.B) {
		rt := NewRoutes("bench", zerolog.Nop())
		On(rt, "stop", subject, func(_ context.Context, _ protocol.Envelope, _ *protocol.ControlStop, in Inbound) error {
			handled += len(in.Conversation)
			return nil
		}, ConversationSubject())
		r, ctx := rt.routes[0], context.Background()
		for b.Loop() {
			rt.deliver(ctx, r, m)
		}
	})
	b.Run("hand-written", func(b *testing.B) {
		h := func(m *nats.Msg) {
			p, err := subjects.Parse(m.Subject)
			if err != nil {
				return
			}
			env, err := protocol.Decode(m.Data)
			if err != nil {
				return
			}
			if _, ok := env.Body.(*protocol.ControlStop); ok {
				handled += len(p.ConversationID)
			}
		}
		for b.Loop() {
			h(m)
		}
	})
}

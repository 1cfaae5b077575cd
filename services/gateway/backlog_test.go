package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/nats-io/nats.go/jetstream"
)

// TestBacklogRefusedAtTheEdge: with persistence away, the WebSocket takes
// client input until the envelopes not applied take half of CONVERSATIONS
// (1 MiB here), then refuses it with a recoverable 504 naming the backlog,
// the connection kept: the stream never drops an envelope persistence has
// not stored.
func TestBacklogRefusedAtTheEdge(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.noPersistence = true
		o.gateway = func(c *gateway.Config) {
			c.Streams.ConversationsMaxBytes = 1 << 20 // the gateway, alone here, creates the streams
			c.Quotas.Edge.SessionRate, c.Quotas.Edge.SessionBurst = 1e6, 1e6
			c.Quotas.Edge.UserRate, c.Quotas.Edge.UserBurst = 1e6, 1e6
		}
	})
	alice := s.dial(t, aliceKey)
	alice.send("", &protocol.Configuration{})
	cid := *alice.recv().Body.(*protocol.Configuration).ConversationID
	frames := alice.frames()
	content := strings.Repeat("a flood of words ", 240) // ~4 KiB an envelope
	var refused *protocol.Envelope
	tick := time.NewTicker(25 * time.Millisecond) // the pace of the input, not a wait for a condition
	defer tick.Stop()
	for i := 0; i < 400 && refused == nil; i++ {
		<-tick.C
		alice.send(cid, &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: content})
		refused = errorWithin(frames, 0)
	}
	if refused == nil {
		t.Fatal("400 envelopes of 4 KiB taken into a 1 MiB stream with nothing applied")
	}
	em := refused.Body.(*protocol.ErrorMessage)
	if em.Code != protocol.CodeOverloaded || !em.Recoverable || !strings.Contains(em.Message, "ALICIA_STREAM_BACKLOG_LIMIT") {
		t.Fatalf("refusal %+v: want a recoverable 504 naming the backlog limit", em)
	}
	js := natstest.JetStream(t, s.nc)
	st, err := js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.FirstSeq != 1 {
		t.Fatalf("the stream dropped envelopes: first sequence %d", info.State.FirstSeq)
	}
	if info.State.Bytes > 1<<20*3/4 {
		t.Fatalf("the stream took %d bytes before refusing, past three quarters of its 1 MiB", info.State.Bytes)
	}
	// The connection is kept: a ControlStop still goes through.
	alice.send(cid, &protocol.ControlStop{ConversationID: cid})
	subject := subjects.Client(cid, protocol.TypeControlStop)
	testkit.Eventually(t, 5*time.Second, func() bool {
		info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(subject))
		return err == nil && info.State.Subjects[subject] == 1
	}, "the stop was not stored")
}

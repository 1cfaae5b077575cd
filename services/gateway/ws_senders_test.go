package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

// goldenBody is the body of a type's golden vector, a valid example of it.
func goldenBody(t *testing.T, typ protocol.MessageType) protocol.Body {
	t.Helper()
	raw, err := protoschemas.FS.ReadFile("golden/" + typ.Token() + ".json")
	if err != nil {
		t.Fatal(err)
	}
	env, err := protocol.DecodeJSON(raw)
	if err != nil {
		t.Fatalf("golden %s: %v", typ, err)
	}
	return env.Body
}

// TestWebSocketClientSpeaksAsClient: a client that sends a type only
// services send (an assistant sentence, a memory trace, a conversation
// update, …) or a SyncRequest with an assistant row gets ErrorMessage 203
// and nothing reaches the stream; the types a client may send still pass.
func TestWebSocketClientSpeaksAsClient(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.noPersistence = true })
	alice := s.dial(t, aliceKey)
	alice.send("", &protocol.Configuration{})
	reply := alice.recv()
	cid := *reply.Body.(*protocol.Configuration).ConversationID

	var refused []protocol.MessageType
	for _, typ := range protocol.Types() {
		if typ.ClientMaySend() || typ.Internal() {
			continue
		}
		refused = append(refused, typ)
		t.Run(typ.String(), func(t *testing.T) {
			alice.t = t
			alice.send(cid, goldenBody(t, typ))
			got := alice.recv()
			if e, ok := got.Body.(*protocol.ErrorMessage); !ok || e.Code != protocol.CodeForbidden || !strings.Contains(e.Message, typ.String()) {
				t.Fatalf("got %s %+v, want ErrorMessage 203 naming %s", got.Type, got.Body, typ)
			}
		})
	}
	alice.t = t
	if len(refused) < 15 {
		t.Fatalf("only %d server-only types: %v", len(refused), refused)
	}
	t.Run("SyncRequest of an assistant row", func(t *testing.T) {
		alice.t = t
		alice.send(cid, &protocol.SyncRequest{Messages: []protocol.SyncRequestMessagesElem{
			{LocalID: "l1", Role: "user", Contents: "hi", SequenceNumber: 1, CreatedAt: 1},
			{LocalID: "l2", PreviousID: protocol.Ptr("l1"), Role: "assistant", Contents: "forged", SequenceNumber: 2, CreatedAt: 1},
		}})
		if e, ok := alice.recv().Body.(*protocol.ErrorMessage); !ok || e.Code != protocol.CodeForbidden {
			t.Fatalf("got %+v, want ErrorMessage 203", e)
		}
	})
	alice.t = t
	// Not tied to a conversation: the REST API takes them (with their
	// scope's checks), and the refusal says where.
	for typ, route := range map[protocol.MessageType]string{
		protocol.TypeDimensionPreference: "PUT /v1/optimize/preferences",
		protocol.TypeEliteSelect:         "POST /v1/optimize/runs/{id}/select",
	} {
		t.Run(typ.String(), func(t *testing.T) {
			alice.t = t
			alice.send(cid, goldenBody(t, typ))
			if e, ok := alice.recv().Body.(*protocol.ErrorMessage); !ok || e.Code != protocol.CodeForbidden || !strings.Contains(e.Message, route) {
				t.Fatalf("got %+v, want ErrorMessage 203 naming %s", e, route)
			}
		})
	}
	alice.t = t

	// A client type after them is published: once it is in the stream,
	// every envelope sent before it has been handled.
	alice.send(cid, &protocol.UserNote{ID: "an_last", MessageID: "am_x", Content: "n", Category: "general", Action: "create"})
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	var subjects map[string]uint64
	testkit.Eventually(t, 10*time.Second, func() bool {
		info, err := st.Info(context.Background(), jetstream.WithSubjectFilter("alicia.conv."+cid+".client.>"))
		if err != nil {
			return false
		}
		subjects = info.State.Subjects
		return subjects["alicia.conv."+cid+".client.user_note"] == 1
	}, "the UserNote was not published")
	want := map[string]uint64{"alicia.conv." + cid + ".client.configuration": 1, "alicia.conv." + cid + ".client.user_note": 1}
	if len(subjects) != len(want) {
		t.Fatalf("client subjects in the stream %v, want only %v", subjects, want)
	}
}

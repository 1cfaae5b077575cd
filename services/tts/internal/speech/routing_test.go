package speech

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// TestRoutesCountAndLogAMalformedSentence: an AssistantSentence that does
// not decode is counted under the tts's sentence route and logged with its
// subject, and the next, good, sentence is still taken (held for the turn
// it belongs to).
func TestRoutesCountAndLogAMalformedSentence(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	sp := New(Deps{NC: nc, Log: zerolog.New(&logs)}, Settings{Chunk: 20 * time.Millisecond})
	unsubscribe, _, err := sp.listen()
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	orphans := func() int {
		sp.stops.mu.Lock()
		defer sp.stops.mu.Unlock()
		return len(sp.stops.orphans)
	}

	subject := subjects.Server("ac_routes", protocol.TypeAssistantSentence)
	natstest.Dropped(t, nc, &logs, "tts", "sentence", bus.DropEnvelope, subject, []byte("\xc1 not an envelope"))
	if n := orphans(); n != 0 {
		t.Fatalf("%d sentences held after a malformed one", n)
	}

	id := "as_1"
	b, err := protocol.Encode(protocol.New("ac_routes", &protocol.AssistantSentence{ID: &id, ConversationID: "ac_routes", PreviousID: "am_1", Sequence: 1, Text: "Hi."}))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject, b); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return orphans() == 1 }, "the good sentence after the malformed one held")
}

package conns_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
)

// TestRevocationRoutes: a revocation that does not decode is counted under
// the gateway's revocation route and logged with its subject, and the next
// one published is still applied.
func TestRevocationRoutes(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	applied := make(chan conns.Revocation, 4)
	sub, err := conns.Subscribe(nc, zerolog.New(&logs), func(r conns.Revocation) { applied <- r })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	natstest.Dropped(t, nc, &logs, "gateway", "revocation", bus.DropEnvelope, subjects.GatewayRevocations, []byte("{not json"))

	if err := conns.Publish(nc, conns.Revocation{Conversation: "ac_1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-applied:
		if r.Conversation != "ac_1" {
			t.Fatalf("applied %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the good revocation after the malformed one was not applied")
	}
	if len(applied) != 0 {
		t.Fatal("the malformed revocation was applied")
	}
}

package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway"
)

// TestConnectionsPerUser: beyond ALICIA_WS_CONNECTIONS_PER_USER a user's
// upgrade is refused with 429; another user is not affected, and a closed
// connection frees its slot.
func TestConnectionsPerUser(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.gateway = func(c *gateway.Config) { c.Quotas.ConnectionsPerUser = 2 } })
	url := strings.Replace(s.base, "http", "ws", 1) + "/v1/ws?token="
	first := s.dial(t, aliceKey)
	s.dial(t, aliceKey)
	_, resp, err := websocket.Dial(context.Background(), url+aliceKey, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connection: %v, %+v; want 429", err, resp)
	}
	s.dial(t, bobKey)
	first.c.Close(websocket.StatusNormalClosure, "")
	testkit.Eventually(t, 5*time.Second, func() bool {
		c, _, err := websocket.Dial(context.Background(), url+aliceKey, nil)
		if err == nil {
			c.CloseNow()
		}
		return err == nil
	}, "the closed connection's slot was not freed")
}

// TestRoomsPerUser: a user with ALICIA_ROOMS_PER_USER rooms requested or
// held gets 429 for another one (not for one already held); another user
// is not affected; a room that ends (its agent acknowledges the request)
// frees its slot.
func TestRoomsPerUser(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { withLiveKit(c); c.Quotas.RoomsPerUser = 2 }
	})
	var convs [3]conversation
	for i := range convs {
		s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &convs[i])
	}
	token := func(key, cid string) reply { return s.call(t, key, "POST", "/v1/conversations/"+cid+"/token", nil) }
	token(aliceKey, convs[0].ID).want(http.StatusOK, nil)
	token(aliceKey, convs[1].ID).want(http.StatusOK, nil)
	if msg := token(aliceKey, convs[2].ID).wantError(http.StatusTooManyRequests); !strings.Contains(msg, "at most 2") {
		t.Fatalf("429 message %q does not name the limit", msg)
	}
	if n, _ := dispatchQueue(t, s, convs[2].ID); n != 0 {
		t.Fatal("a refused token asked for an agent")
	}
	token(aliceKey, convs[0].ID).want(http.StatusOK, nil) // a room already held is not another room
	var bobs conversation
	s.call(t, bobKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &bobs)
	token(bobKey, bobs.ID).want(http.StatusOK, nil)

	// The agent of the first room leaves it: the request is acknowledged.
	js := natstest.JetStream(t, s.nc)
	cons, err := js.CreateOrUpdateConsumer(t.Context(), bus.StreamDispatch, jetstream.ConsumerConfig{
		Durable: "test-agent", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: subjects.Dispatch("alice", convs[0].ID)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(t.Context()); err != nil {
		t.Fatal(err)
	}
	token(aliceKey, convs[2].ID).want(http.StatusOK, nil)
	if n, _ := dispatchQueue(t, s, convs[2].ID); n != 1 {
		t.Fatalf("%d dispatch requests for the third room, want 1", n)
	}
}

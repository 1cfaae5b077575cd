package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

type ctxKey struct{}

func publish(t *testing.T, nc *nats.Conn, subject string, data []byte) {
	t.Helper()
	if err := nc.Publish(subject, data); err != nil {
		t.Fatal(err)
	}
}

func encode(t *testing.T, env protocol.Envelope) []byte {
	t.Helper()
	b, err := protocol.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoutesDropCountAndLog: every way a core-NATS message can be
// unreadable is counted under its route and logged with the subject, and
// the route goes on handling the next good message.
func TestRoutesDropCountAndLog(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	rt := bus.NewRoutes("bus-test", zerolog.New(&logs))
	got := make(chan string, 16)
	bus.On(rt, "stop", subjects.AllOfType(subjects.OriginClient, protocol.TypeControlStop),
		func(ctx context.Context, env protocol.Envelope, stop *protocol.ControlStop, in bus.Inbound) error {
			if ctx.Value(ctxKey{}) != "v" {
				t.Error("the handler does not get Subscribe's context values")
			}
			if stop.TargetID != nil && *stop.TargetID == "refuse" {
				return errors.New("refused by the handler")
			}
			if stop.TargetID != nil && *stop.TargetID == "panic" {
				panic("boom")
			}
			got <- in.Conversation + " " + env.ConversationID
			return nil
		}, bus.ConversationSubject())
	bus.OnDecoded(rt, "loose", "test.loose", bus.Raw, func(context.Context, []byte, bus.Inbound) error { return nil }, bus.ConversationSubject())
	type note struct{ N int }
	bus.OnDecoded(rt, "json", "test.json", bus.JSON[note], func(_ context.Context, n note, _ bus.Inbound) error {
		got <- "json " + string(rune('0'+n.N))
		return nil
	})
	subs, err := rt.Subscribe(context.WithValue(context.Background(), ctxKey{}, "v"), nc)
	if err != nil {
		t.Fatal(err)
	}
	defer subs.Close()

	stopOn := func(cid, target string) []byte {
		return encode(t, protocol.New(cid, &protocol.ControlStop{ConversationID: cid, TargetID: &target}))
	}
	good := subjects.Client("ac_good", protocol.TypeControlStop)
	for _, tc := range []struct {
		name, route, subject, reason string
		data                         []byte
	}{
		{"undecodable envelope", "stop", good, bus.DropEnvelope, []byte("not msgpack")},
		{"wrong body type", "stop", good, bus.DropType, encode(t, protocol.New("ac_good", &protocol.UserMessage{ID: "m", ConversationID: "ac_good"}))},
		{"bad subject", "loose", "test.loose", bus.DropSubject, stopOn("ac_good", "x")},
		{"refused", "stop", good, bus.DropHandler, stopOn("ac_good", "refuse")},
		{"panic", "stop", good, bus.DropHandler, stopOn("ac_good", "panic")},
		{"bad json", "json", "test.json", bus.DropEnvelope, []byte("{")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			natstest.Dropped(t, nc, &logs, "bus-test", tc.route, tc.reason, tc.subject, tc.data)
		})
	}
	publish(t, nc, good, stopOn("ac_good", "x"))
	publish(t, nc, "test.json", []byte(`{"N":7}`))
	seen := map[string]bool{}
	for range 2 {
		select {
		case g := <-got:
			seen[g] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("the good messages after the bad ones were not all handled (handled %v)", seen)
		}
	}
	if !seen["ac_good ac_good"] || !seen["json 7"] {
		t.Errorf("handled %v, want the stop of ac_good and json 7", seen)
	}
}

// TestRoutesLogClipsTheReason: a long error is logged cut short.
func TestRoutesLogClipsTheReason(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	rt := bus.NewRoutes("bus-clip", zerolog.New(&logs))
	bus.OnDecoded(rt, "raw", "test.raw", bus.Raw, func(_ context.Context, b []byte, _ bus.Inbound) error {
		return errors.New(strings.Repeat("x", 1000))
	})
	subs, err := rt.Subscribe(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	defer subs.Close()
	publish(t, nc, "test.raw", nil)
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), "xxx") }, "drop logged")
	if n := strings.Count(logs.String(), "x"); n > 250 {
		t.Errorf("the reason is logged whole (%d bytes)", n)
	}
}

// TestRoutesSubscribeAllOrNone: a route that cannot subscribe leaves no
// subscription of the table behind; Close and Unsubscribe end them.
func TestRoutesSubscribeAllOrNone(t *testing.T) {
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	rt := bus.NewRoutes("bus-all", zerolog.Nop())
	handled := make(chan struct{}, 4)
	h := func(context.Context, []byte, bus.Inbound) error { handled <- struct{}{}; return nil }
	bus.OnDecoded(rt, "a", "test.a", bus.Raw, h)
	bus.OnDecoded(rt, "b", "test.b", bus.Raw, h, bus.Queue("q"))
	bus.OnDecoded(rt, "bad", "test.bad subject", bus.Raw, h) // a subject with a space is refused
	if _, err := rt.Subscribe(context.Background(), nc); err == nil {
		t.Fatal("a table with an invalid subject subscribed")
	}
	if n := nc.NumSubscriptions(); n != 0 {
		t.Fatalf("%d subscriptions left after a failed Subscribe", n)
	}

	rt = bus.NewRoutes("bus-all", zerolog.Nop())
	bus.OnDecoded(rt, "a", "test.a", bus.Raw, h)
	bus.OnDecoded(rt, "b", "test.b", bus.Raw, h, bus.Queue("q"), bus.PendingLimits(10, 1<<20))
	subs, err := rt.Subscribe(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if n := nc.NumSubscriptions(); n != 2 {
		t.Fatalf("%d subscriptions, want 2", n)
	}
	subs.Each(func(route string, sub *nats.Subscription) {
		if m, _, _ := sub.PendingLimits(); route == "b" && m != 10 {
			t.Errorf("route b's pending limit is %d, want 10", m)
		}
	})
	subs.Unsubscribe("b")
	if n := nc.NumSubscriptions(); n != 1 {
		t.Fatalf("%d subscriptions after Unsubscribe(b), want 1", n)
	}
	subs.Close()
	subs.Close()
	if n := nc.NumSubscriptions(); n != 0 {
		t.Fatalf("%d subscriptions after Close", n)
	}
}

package ports_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/memory/internal/app"
	"github.com/alicia-voice/alicia/services/memory/internal/ports"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWritesSettled: what the prefetch cache relies on, with the real
// client and server. A request published after a memory write reaches its
// handler (another subscription of the connection, another goroutine)
// either after the write's handler has returned or while Settled is false:
// the client counts a message as pending from its read loop until its
// handler returns. Fails when a nats.go upgrade changes that.
func TestWritesSettled(t *testing.T) {
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	pub := natstest.Connect(t, ns)

	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var handled atomic.Int32
	w := ports.NewWrites(nc)
	err := w.Start(func(user, msgID string) {
		if user != "" || msgID != "m1" {
			t.Errorf("write of %q, message id %q: an unreadable action names no user", user, msgID)
		}
		entered <- struct{}{}
		<-release
		handled.Add(1)
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if !w.Settled() {
		t.Fatal("not settled before any write")
	}
	epoch := w.Epoch()

	seen := make(chan bool, 1)
	if _, err := nc.Subscribe("memory.search.test", func(*nats.Msg) { seen <- !w.Settled() || handled.Load() == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	write := nats.NewMsg(subjects.System(protocol.TypeMemoryAction))
	write.Header.Set("Nats-Msg-Id", "m1")
	write.Data = []byte("not an envelope")
	if err := pub.PublishMsg(write); err != nil {
		t.Fatal(err)
	}
	<-entered // the write's handler runs, and blocks
	if err := pub.Publish("memory.search.test", nil); err != nil {
		t.Fatal(err)
	}
	if ok := <-seen; !ok {
		t.Fatal("the request's handler saw Settled while the write before it was being handled")
	}
	close(release)
	testkit.Eventually(t, 5*time.Second, w.Settled, "settled once the write is handled")

	// A reconnection changes the epoch: writes published meanwhile may be lost.
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return nc.IsConnected() && w.Epoch() != epoch }, "a new epoch after the reconnection")
	// Settled again once the subscriptions are known back on the server;
	// and they are: a write published now is heard.
	testkit.Eventually(t, 5*time.Second, w.Settled, "settled after the reconnection")
	if err := pub.PublishMsg(write); err != nil {
		t.Fatal(err)
	}
	<-entered
	testkit.Eventually(t, 5*time.Second, func() bool { return handled.Load() == 2 }, "the write after the reconnection handled")
}

// prefetcher records the searches PrefetchUserMessages starts.
type prefetcher struct{ texts chan string }

func (p prefetcher) Prefetch(_ context.Context, userID, text string) (bool, error) {
	p.texts <- userID + ": " + text
	return true, nil
}

func encode(t *testing.T, env protocol.Envelope) []byte {
	t.Helper()
	b, err := protocol.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoutesCountAndLogMalformedMessages: a UserMessage or a memory write
// that does not decode is counted under its route and logged with its
// subject; the next good ones are handled (a search prefetched for the
// user; the write told with its user).
func TestRoutesCountAndLogMalformedMessages(t *testing.T) {
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	pub := natstest.Connect(t, ns)
	var logs testkit.SyncBuffer
	log := zerolog.New(&logs)

	p := prefetcher{texts: make(chan string, 4)}
	stop, err := ports.PrefetchUserMessages(context.Background(), nc, p, nil, time.Minute, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	subject := subjects.Client("ac_routes", protocol.TypeUserMessage)
	natstest.Dropped(t, pub, &logs, "memory-prefetch", "user_message", bus.DropEnvelope, subject, []byte("\xc1 not an envelope"))
	env := protocol.New("ac_routes", &protocol.UserMessage{ID: "um_1", ConversationID: "ac_routes", Content: "my cat"})
	env.Meta = map[string]any{app.MetaUserID: "u1"}
	if err := pub.Publish(subject, encode(t, env)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-p.texts:
		if got != "u1: my cat" {
			t.Fatalf("prefetched %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the good UserMessage after the malformed one was not prefetched")
	}

	written := make(chan string, 4)
	w := ports.NewWrites(nc)
	if err := w.Start(func(user, _ string) { written <- user }, log); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := subjects.System(protocol.TypeMemoryAction)
	natstest.Dropped(t, pub, &logs, "memory-writes", "system", bus.DropEnvelope, writes, []byte("\xc1 not an envelope"))
	if got := <-written; got != "" {
		t.Fatalf("an unreadable write names user %q; it must drop every user's searches", got)
	}
	env = protocol.New("", &protocol.MemoryAction{Action: protocol.MemoryActionActionDelete, ID: "mem_1", Timestamp: 1})
	env.Meta = map[string]any{app.MetaUserID: "u1"}
	if err := pub.Publish(writes, encode(t, env)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-written:
		if got != "u1" {
			t.Fatalf("write of %q, want u1", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the good write after the malformed one was not told")
	}
}

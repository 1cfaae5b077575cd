package ports_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
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

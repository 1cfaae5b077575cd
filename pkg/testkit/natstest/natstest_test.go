package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunPublishAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()

	s1 := natstest.RunWithDir(t, dir)
	nc1 := natstest.Connect(t, s1)
	js1 := natstest.JetStream(t, nc1)
	if _, err := js1.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	ack, err := js1.Publish(ctx, "t.one", []byte("hello"))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	nc1.Close()
	s1.Shutdown()
	s1.WaitForShutdown()

	s2 := natstest.RunWithDir(t, dir)
	if s2.ClientURL() == "" {
		t.Fatal("no client URL")
	}
	js2 := natstest.JetStream(t, natstest.Connect(t, s2))
	st, err := js2.Stream(ctx, "T")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	msg, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatalf("get message after restart: %v", err)
	}
	if string(msg.Data) != "hello" || msg.Subject != "t.one" {
		t.Fatalf("after restart got %q on %q, want \"hello\" on t.one", msg.Data, msg.Subject)
	}
}

func TestRunIsolated(t *testing.T) {
	a, b := natstest.Run(t), natstest.Run(t)
	if a.ClientURL() == b.ClientURL() {
		t.Fatalf("two servers share %s", a.ClientURL())
	}
	if a.StoreDir() == b.StoreDir() {
		t.Fatalf("two servers share store %s", a.StoreDir())
	}
	if !a.JetStreamEnabled() {
		t.Fatal("JetStream disabled")
	}
}

// TestRunCluster: three servers routed on 127.0.0.1 hold an R3 stream; a
// message published through one is read through another.
func TestRunCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := natstest.RunCluster(t, 3, "t")
	js1 := natstest.JetStream(t, natstest.Connect(t, servers[0]))
	// The meta leader may not count every peer online yet ("no suitable
	// peers for placement"): asked again until it does.
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		_, err := js1.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		return err
	}, "an R3 stream created")
	if _, err := js1.Publish(ctx, "r3.one", []byte("hello")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	js3 := natstest.JetStream(t, natstest.Connect(t, servers[2]))
	s, err := js3.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream through the third server: %d messages, cluster %+v; want 1 message on a leader and 2 replicas", info.State.Msgs, info.Cluster)
	}
}

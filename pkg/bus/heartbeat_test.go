package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// A message under Heartbeat stays with its consumer past AckWait; once the
// heartbeat stops it is redelivered.
func TestHeartbeatHoldsAMessagePastAckWait(t *testing.T) {
	s := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, s))
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HB", Subjects: []string{"hb.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	const ackWait = 300 * time.Millisecond
	cons, err := js.CreateOrUpdateConsumer(ctx, "HB", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "hb.job", []byte("job")); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next()
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); bus.Heartbeat(hctx, m, ackWait) }()
	// Four times AckWait: without the heartbeat it would come back.
	if again, err := cons.Next(jetstream.FetchMaxWait(4 * ackWait)); err == nil {
		t.Fatalf("redelivered while the heartbeat ran: delivery %d", deliveries(t, again))
	}
	stop()
	<-done
	again, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("not redelivered after the heartbeat stopped: %v", err)
	}
	if n := deliveries(t, again); n != 2 {
		t.Fatalf("delivery %d, want 2", n)
	}
}

func deliveries(t *testing.T, m jetstream.Msg) uint64 {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return md.NumDelivered
}

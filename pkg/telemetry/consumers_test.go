package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestConsumerLag: the exported pending, ack-pending and redelivered counts
// are the server's, for the consumers the service names and no other;
// two services of one process share one collector and a stream they both
// read is exported once; a removed service's consumers disappear.
func TestConsumerLag(t *testing.T) {
	srv, err := natsserver.Start(natsserver.Options{URL: "nats://127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		testkit.Missing(t, "embedded nats-server: %v", err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := js.Publish(ctx, "work.a", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "asr", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "other", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	// Take 3: one acknowledged, one refused (delivered again), one held.
	batch, err := mine.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("fetched %d messages, want 3", len(got))
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if err := got[1].Nak(); err != nil {
		t.Fatal(err)
	}
	// Take until the refused one comes back, holding everything taken.
	extra := 0
	for back := false; !back; {
		again, err := mine.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range again.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if md.NumDelivered == 2 {
				back = true
			} else {
				extra++
			}
		}
		if n == 0 {
			t.Fatal("the refused message never came back")
		}
	}

	remove, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js,
		Consumers: map[string][]string{"WORK": {"asr"}}, Log: testkit.Log()})
	if err != nil {
		t.Fatal(err)
	}
	// A second service of the process reads the same stream with no consumer of its own.
	removeB, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js,
		Consumers: map[string][]string{"WORK": nil}, Log: testkit.Log()})
	if err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf(`
# HELP alicia_jetstream_consumer_ack_pending_messages Messages delivered to the consumer and not acknowledged yet.
# TYPE alicia_jetstream_consumer_ack_pending_messages gauge
alicia_jetstream_consumer_ack_pending_messages{consumer="asr",stream="WORK"} %d
# HELP alicia_jetstream_consumer_pending_messages Messages of the stream not yet delivered to the consumer (its lag).
# TYPE alicia_jetstream_consumer_pending_messages gauge
alicia_jetstream_consumer_pending_messages{consumer="asr",stream="WORK"} %d
# HELP alicia_jetstream_consumer_redelivered_messages Messages delivered more than once and not acknowledged yet.
# TYPE alicia_jetstream_consumer_redelivered_messages gauge
alicia_jetstream_consumer_redelivered_messages{consumer="asr",stream="WORK"} 1
# HELP alicia_jetstream_scrape_errors 1 when the last scrape could not read a stream's or a consumer's state from the server, else 0.
# TYPE alicia_jetstream_scrape_errors gauge
alicia_jetstream_scrape_errors{stream="WORK"} 0
# HELP alicia_jetstream_stream_messages Messages stored in the stream.
# TYPE alicia_jetstream_stream_messages gauge
alicia_jetstream_stream_messages{stream="WORK"} 10
`, 2+extra, 7-extra)
	names := []string{"alicia_jetstream_consumer_ack_pending_messages", "alicia_jetstream_consumer_pending_messages",
		"alicia_jetstream_consumer_redelivered_messages", "alicia_jetstream_scrape_errors", "alicia_jetstream_stream_messages"}
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// Without the service that matched "asr", nothing of it is exported;
	// the stream still is, for the one left.
	remove()
	n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "alicia_jetstream_consumer_pending_messages")
	if err != nil || n != 0 {
		t.Fatalf("after remove: %d pending series (%v), want 0", n, err)
	}
	if n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "alicia_jetstream_stream_messages"); err != nil || n != 1 {
		t.Fatalf("after remove: %d stream series (%v), want 1", n, err)
	}

	// A stream the server does not have: a scrape error, not a failed scrape.
	removeC, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js,
		Consumers: map[string][]string{"GONE": nil}, Log: testkit.Log(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(`
# HELP alicia_jetstream_scrape_errors 1 when the last scrape could not read a stream's or a consumer's state from the server, else 0.
# TYPE alicia_jetstream_scrape_errors gauge
alicia_jetstream_scrape_errors{stream="GONE"} 1
alicia_jetstream_scrape_errors{stream="WORK"} 0
`), "alicia_jetstream_scrape_errors"); err != nil {
		t.Fatal(err)
	}
	removeC()

	// A consumer that is not there: an error, and no lag of 0.
	removeD, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js,
		Consumers: map[string][]string{"WORK": {"deleted"}}, Log: testkit.Log()})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(`
# HELP alicia_jetstream_scrape_errors 1 when the last scrape could not read a stream's or a consumer's state from the server, else 0.
# TYPE alicia_jetstream_scrape_errors gauge
alicia_jetstream_scrape_errors{stream="WORK"} 1
`), "alicia_jetstream_scrape_errors"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "alicia_jetstream_consumer_pending_messages"); err != nil || n != 0 {
		t.Fatalf("a missing consumer: %d pending series (%v), want 0", n, err)
	}
	removeD()
	removeB()
}

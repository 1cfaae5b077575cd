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
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestConsumerLag: the exported pending, ack-pending and redelivered counts
// are the server's, for the consumers the service names and no other;
// two services of one process share one collector and a stream they both
// read is exported once; a removed service's consumers disappear.
func TestConsumerLag(t *testing.T) {
	_, js, s, ctx := streamOfTen(t, "WORK", "work")
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

// TestConsumerLagInstanceLabel: a consumer named by InstanceConsumer
// (persistence-<instance>-<random token>) is exported as
// persistence-<instance>, the same series across a restart that changes the
// token; a look-alike name of another service keeps its 16 hex digits; two
// live consumers with one label export one series, the one furthest behind,
// with a warning.
func TestConsumerLagInstanceLabel(t *testing.T) {
	for _, tok := range []string{"0123456789abcdef", telemetry.NewInstanceToken()} {
		if !telemetry.ValidInstanceToken(tok) {
			t.Errorf("token %q refused", tok)
		}
	}
	for _, tok := range []string{"", "0123456789abcde", "0123456789ABCDEF", "0123456789abcdefa", "0123456789abcdeg"} {
		if telemetry.ValidInstanceToken(tok) {
			t.Errorf("token %q accepted", tok)
		}
	}
	if n := telemetry.InstanceConsumer("persistence", "host-1", "NOT-A-TOKEN"); telemetry.ConsumerLabel(n) != n {
		t.Errorf("label of %q: %q, want the whole name (no valid token)", n, telemetry.ConsumerLabel(n))
	}
	if l := telemetry.ConsumerLabel("persistence-never-made-0123456789abcdef"); l != "persistence-never-made-0123456789abcdef" {
		t.Errorf("a name InstanceConsumer did not make is exported as %q", l)
	}

	_, js, s, ctx := streamOfTen(t, "LABELS", "labels")
	// from creates a durable consumer whose first message is sequence
	// start: 11-start pending.
	from := func(name string, start uint64) {
		t.Helper()
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(series string) string {
		return `
# HELP alicia_jetstream_consumer_pending_messages Messages of the stream not yet delivered to the consumer (its lag).
# TYPE alicia_jetstream_consumer_pending_messages gauge
` + series
	}
	const metric = "alicia_jetstream_consumer_pending_messages"

	first := telemetry.InstanceConsumer("persistence", "host-1", telemetry.NewInstanceToken())
	lookalike := "asr-0123456789abcdef"
	from(first, 1)
	from(lookalike, 4)
	remove, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: testkit.Log(),
		Consumers: map[string][]string{"LABELS": {first, lookalike}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(pending(`
alicia_jetstream_consumer_pending_messages{consumer="asr-0123456789abcdef",stream="LABELS"} 7
alicia_jetstream_consumer_pending_messages{consumer="persistence-host-1",stream="LABELS"} 10
`)), metric); err != nil {
		t.Fatal(err)
	}
	remove()

	// The instance restarts: a new token, a new consumer, the same series.
	if err := s.DeleteConsumer(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := telemetry.InstanceConsumer("persistence", "host-1", telemetry.NewInstanceToken())
	if second == first {
		t.Fatalf("the restarted instance's consumer is named %q again", second)
	}
	from(second, 5)
	remove, err = telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: testkit.Log(),
		Consumers: map[string][]string{"LABELS": {second}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(pending(`
alicia_jetstream_consumer_pending_messages{consumer="persistence-host-1",stream="LABELS"} 6
`)), metric); err != nil {
		t.Fatal(err)
	}

	// Another instance of the same name in the process, further behind:
	// one series, its figures, and a warning naming both consumers; then,
	// the other behind, the other's figures (the pick follows the lag,
	// whichever name sorts first).
	// (Both log to logs: a stream's scrape logs through either member.)
	var logs testkit.SyncBuffer // written by the collector's goroutines
	remove()
	remove, err = telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: zerolog.New(&logs),
		Consumers: map[string][]string{"LABELS": {second}}})
	if err != nil {
		t.Fatal(err)
	}
	third := telemetry.InstanceConsumer("persistence", "host-1", telemetry.NewInstanceToken())
	from(third, 2)
	removeThird, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: zerolog.New(&logs),
		Consumers: map[string][]string{"LABELS": {third}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(pending(`
alicia_jetstream_consumer_pending_messages{consumer="persistence-host-1",stream="LABELS"} 9
`)), metric); err != nil {
			t.Fatal(err)
		}
	}
	if out := logs.String(); !strings.Contains(out, "consumers sharing one label") || !strings.Contains(out, second) ||
		!strings.Contains(out, `"exported":"`+third+`"`) {
		t.Errorf("no warning naming both consumers and the one exported: %s", out)
	}
	// The other one behind now.
	removeThird()
	if err := s.DeleteConsumer(ctx, third); err != nil {
		t.Fatal(err)
	}
	from(third, 8)
	removeThird, err = telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: testkit.Log(),
		Consumers: map[string][]string{"LABELS": {third}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(pending(`
alicia_jetstream_consumer_pending_messages{consumer="persistence-host-1",stream="LABELS"} 6
`)), metric); err != nil {
		t.Fatal(err)
	}
	removeThird()
	remove()
}

// streamOfTen starts an embedded server and makes stream name (subjects
// prefix.>) with ten messages on prefix.a; everything ends with the test.
func streamOfTen(t *testing.T, name, prefix string) (*nats.Conn, jetstream.JetStream, jetstream.Stream, context.Context) {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Options{URL: "nats://127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		testkit.Missing(t, "embedded nats-server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := js.Publish(ctx, prefix+".a", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	return nc, js, s, ctx
}

package backlog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEstimate(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	info := func(first, last, msgs, bytes uint64, maxBytes int64) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Created: created, Config: jetstream.StreamConfig{MaxBytes: maxBytes},
			State: jetstream.StreamState{FirstSeq: first, LastSeq: last, Msgs: msgs, Bytes: bytes}}
	}
	for _, c := range []struct {
		name      string
		info      *jetstream.StreamInfo
		report    backlog.Report
		ok        bool
		applied   uint64
		bytes     int64
		over      bool
		lost      bool
		reported  bool
		unapplied uint64
	}{
		{"applied all", info(1, 100, 100, 100_000, 200_000), backlog.Report{Applied: 100, StreamCreated: created}, true, 100, 0, false, false, true, 0},
		{"half the stream behind", info(1, 100, 100, 100_000, 200_000), backlog.Report{Applied: 0, StreamCreated: created}, true, 0, 100_000, true, false, true, 100},
		{"just under", info(1, 100, 100, 100_000, 200_000), backlog.Report{Applied: 1, StreamCreated: created}, true, 1, 99_000, false, false, true, 99},
		{"no report: everything held counts", info(51, 100, 50, 50_000, 100_000), backlog.Report{}, false, 50, 50_000, true, false, false, 50},
		{"a report of another stream of the name", info(1, 10, 10, 1000, 1000), backlog.Report{Applied: 10, StreamCreated: created.Add(-time.Hour)}, true, 0, 1000, true, false, false, 10},
		{"no size limit never refuses", info(1, 100, 100, 1<<40, -1), backlog.Report{StreamCreated: created}, true, 0, 1 << 40, false, false, true, 100},
		{"dropped unapplied", info(60, 100, 41, 41_000, 41_000), backlog.Report{Applied: 20, StreamCreated: created}, true, 20, 41_000, true, true, true, 41},
		{"aged out after being applied", info(101, 100, 0, 0, 1000), backlog.Report{Applied: 100, StreamCreated: created}, true, 100, 0, false, false, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := backlog.Estimate(c.info, c.report, c.ok)
			if s.Applied != c.applied || s.UnappliedBytes != c.bytes || s.Over(0.5) != c.over || s.Lost != c.lost || s.Reported != c.reported || s.Unapplied != c.unapplied {
				t.Fatalf("estimate %+v (over %v), want applied %d, %d bytes, over %v, lost %v, reported %v, unapplied %d",
					s, s.Over(0.5), c.applied, c.bytes, c.over, c.lost, c.reported, c.unapplied)
			}
		})
	}
}

func TestLimitFrom(t *testing.T) {
	for _, c := range []struct {
		env  string
		want float64
		bad  bool
	}{{"", 0.5, false}, {"0.25", 0.25, false}, {"1", 1, false}, {"0", 0.5, true}, {"1.5", 0.5, true}, {"half", 0.5, true}} {
		t.Setenv(backlog.EnvLimit, c.env)
		got, err := backlog.LimitFrom(config.Environ())
		if got != c.want || (err != nil) != c.bad || (err != nil && !strings.Contains(err.Error(), backlog.EnvLimit)) {
			t.Errorf("%q: %v, %v; want %v, error %v", c.env, got, err, c.want, c.bad)
		}
	}
}

// TestWatcher: on a real server, with a 1 MiB CONVERSATIONS and a report
// that stays behind, the watcher refuses once half the stream is not
// applied, well before the stream is full; a report that catches up ends
// it. Without anyone refusing, the stream goes on to drop envelopes the
// report has not reached, and the estimate says so.
func TestWatcher(t *testing.T) {
	ctx := t.Context()
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{ConversationsMaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	created := s.CachedInfo().Created
	// Before persistence ever ran: no bucket, an empty stream, no refusal.
	w, err := backlog.Watch(ctx, js, backlog.Config{Interval: 5 * time.Millisecond, Limit: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, _, refuse := w.Refuse(); refuse {
		t.Fatal("refusing on an empty stream")
	}
	kv, err := backlog.EnsureBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := backlog.Publish(ctx, kv, backlog.Report{Applied: 0, StreamCreated: created}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	publish := func() uint64 {
		ack, err := js.Publish(ctx, "alicia.conv.ac_w.client.audio_chunk", chunk)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, func() bool { return w.State().LastSeq >= ack.Sequence }, "watcher never saw %d", ack.Sequence)
		return ack.Sequence
	}
	var last uint64
	for range 100 {
		if _, _, refuse := w.Refuse(); refuse {
			break
		}
		last = publish()
	}
	st := w.State()
	if _, _, refuse := w.Refuse(); !refuse || !st.Reported || st.FirstSeq != 1 || st.Ratio() < 0.5 || st.Ratio() > 0.55 {
		t.Fatalf("after %d envelopes of 16 KiB: refuse %v, state %+v (ratio %.2f): want refusal at half the stream, nothing dropped", last, refuse, st, st.Ratio())
	}
	if err := backlog.Publish(ctx, kv, backlog.Report{Applied: last, StreamCreated: created}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { _, _, refuse := w.Refuse(); return !refuse }, "still refusing after the report caught up")

	// The same flood with nobody refusing, the report stuck at last.
	for w.State().FirstSeq <= last+1 {
		publish()
	}
	if st := w.State(); !st.Lost || st.Applied != last {
		t.Fatalf("state %+v: want the loss past applied %d seen", st, last)
	}
}

// TestWatchUnreadableStream: a watcher that cannot read CONVERSATIONS
// (no stream, or no permission) fails at once rather than never refusing.
func TestWatchUnreadableStream(t *testing.T) {
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
	if _, err := backlog.Watch(t.Context(), js, backlog.Config{}); err == nil || !strings.Contains(err.Error(), bus.StreamConversations) {
		t.Fatalf("watch without the stream: %v, want an error naming it", err)
	}
	if _, err := backlog.Watch(t.Context(), js, backlog.Config{Limit: 2}); err == nil || !strings.Contains(err.Error(), backlog.EnvLimit) {
		t.Fatalf("watch with limit 2: %v, want an error naming %s", err, backlog.EnvLimit)
	}
}

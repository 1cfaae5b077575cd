package persistence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// resets reads alicia_persistence_stream_resets_total{stream} from the
// default registry (shared by every test of the process, so compare deltas).
func resets(t *testing.T, stream string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "alicia_persistence_stream_resets_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream" && l.GetValue() == stream {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// newNATS points the stack at a brand-new JetStream server (a new store:
// its streams number their messages from 1 again), as a new ALICIA_DATA_DIR
// or a new NATS cluster would.
func (s *stack) newNATS() {
	s.t.Helper()
	ns := natstest.Run(s.t)
	nc := natstest.Connect(s.t, ns)
	js := natstest.JetStream(s.t, nc)
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		s.t.Fatal(err)
	}
	s.ns, s.nc, s.js, s.pub = ns, nc, js, bus.NewPublisher(js)
	s.cfg.NATSURL = ns.ClientURL()
}

// offsetRow is persistence's stored offset of a stream.
func (s *stack) offsetRow(stream string) (lastSeq int64, created string, epoch int) {
	s.t.Helper()
	err := s.pool.QueryRow(context.Background(), `SELECT last_seq, stream_created, epoch FROM alicia_stream_offsets
		WHERE stream = $1 AND consumer = $2`, stream, s.cfg.Consumer).Scan(&lastSeq, &created, &epoch)
	if err != nil {
		s.t.Fatalf("offset of %s: %v", stream, err)
	}
	return lastSeq, created, epoch
}

// TestNewStreamExistingDatabase: a database that persistence filled from one
// CONVERSATIONS stream, then a new JetStream store whose stream starts at
// sequence 1 again. Everything the new stream carries reaches Postgres —
// nothing up to the old offset is skipped — including meta rows (whose ids
// derive from the sequence) and a title change on a conversation the old
// stream had already renamed at a higher sequence.
func TestNewStreamExistingDatabase(t *testing.T) {
	s := newStack(t)
	s.start()
	const old = "ac_old_stream"
	var last uint64
	for i := 1; i <= 20; i++ {
		s.client(old, int32(i), &protocol.UserMessage{ID: fmt.Sprintf("am_old_%d", i), ConversationID: old, Content: "before"},
			map[string]any{"clientVersion": "1"})
	}
	last = s.client(old, 21, &protocol.ConversationUpdate{ConversationID: old, Title: ptr("first title"), UpdatedAt: time.Now().UnixMilli()}, nil)
	s.history(old, last)
	if seq, created, epoch := s.offsetRow(bus.StreamConversations); seq != int64(last) || created == "" || epoch != 0 {
		t.Fatalf("offset after the first stream: seq %d created %q epoch %d, want %d, a creation time, 0", seq, created, epoch, last)
	}
	s.stop()
	before := resets(t, bus.StreamConversations)

	s.newNATS()
	const cid = "ac_new_stream"
	for i := 1; i <= 5; i++ {
		s.client(cid, int32(i), &protocol.UserMessage{ID: fmt.Sprintf("am_new_%d", i), ConversationID: cid, Content: "after"},
			map[string]any{"clientVersion": "2"})
	}
	last = s.client(old, 22, &protocol.ConversationUpdate{ConversationID: old, Title: ptr("second title"), UpdatedAt: time.Now().UnixMilli()}, nil)
	if last >= 21 {
		t.Fatalf("the new stream is at %d: it must restart below the old offset for this test", last)
	}
	s.start()
	s.history(cid, last)
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE conversation_id = $1 AND contents = 'after'`, cid); n != 5 {
		t.Fatalf("%d of the new stream's 5 messages stored", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_meta WHERE ref LIKE 'am_new_%' AND key = 'clientVersion'`); n != 5 {
		t.Fatalf("%d of the new stream's 5 meta rows stored", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_meta WHERE ref LIKE 'am_old_%' AND key = 'clientVersion'`); n != 20 {
		t.Fatalf("the old stream's meta rows: %d, want 20", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_conversations WHERE id = $1 AND title = 'second title'`, old); n != 1 {
		t.Fatal("the new stream's title change was ignored: it compared below the old stream's sequence")
	}
	seq, created, epoch := s.offsetRow(bus.StreamConversations)
	info, err := s.js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	if seq != int64(last) || epoch != 1 || created != info.CachedInfo().Created.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("offset after the new stream: seq %d created %q epoch %d; want %d, the new stream's creation, 1", seq, created, epoch, last)
	}
	if got := resets(t, bus.StreamConversations); got != before+1 {
		t.Fatalf("stream_resets_total = %v, want %v", got, before+1)
	}

	// The next restart is on the same stream: it resumes, no new epoch.
	s.stop()
	s.start()
	last = s.client(cid, 6, &protocol.UserMessage{ID: "am_new_6", ConversationID: cid, Content: "after"}, nil)
	s.history(cid, last)
	if _, _, epoch := s.offsetRow(bus.StreamConversations); epoch != 1 {
		t.Fatalf("epoch after a restart on the same stream = %d, want 1", epoch)
	}
	if got := resets(t, bus.StreamConversations); got != before+1 {
		t.Fatalf("stream_resets_total after a plain restart = %v, want %v", got, before+1)
	}
}

// TestSameStreamResumes: a restart against the same stream resumes after
// the stored offset (the consumer starts there) and resets nothing.
func TestSameStreamResumes(t *testing.T) {
	s := newStack(t)
	s.start()
	const cid = "ac_resume"
	var last uint64
	for i := 1; i <= 10; i++ {
		last = s.client(cid, int32(i), &protocol.UserMessage{ID: fmt.Sprintf("am_resume_%d", i), ConversationID: cid, Content: "x"}, nil)
	}
	s.history(cid, last)
	s.stop()
	before := resets(t, bus.StreamConversations)
	stopped := last
	for i := 11; i <= 13; i++ {
		last = s.client(cid, int32(i), &protocol.UserMessage{ID: fmt.Sprintf("am_resume_%d", i), ConversationID: cid, Content: "x"}, nil)
	}
	s.start()
	s.history(cid, last)
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE conversation_id = $1`, cid); n != 13 {
		t.Fatalf("%d messages, want 13", n)
	}
	c, err := s.js.Consumer(context.Background(), bus.StreamConversations, s.cfg.InstanceConsumer())
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.CachedInfo().Config; cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || cfg.OptStartSeq != stopped+1 {
		t.Fatalf("consumer starts with %v at %d, want by start sequence at %d", cfg.DeliverPolicy, cfg.OptStartSeq, stopped+1)
	}
	if _, _, epoch := s.offsetRow(bus.StreamConversations); epoch != 0 {
		t.Fatalf("epoch = %d, want 0", epoch)
	}
	if got := resets(t, bus.StreamConversations); got != before {
		t.Fatalf("stream_resets_total = %v, want %v (no reset)", got, before)
	}
}

// TestOffsetsWithoutStreamIdentity: offsets stored before stream identities
// were recorded are adopted by the stream found when they fit in it, and
// discarded when they lie beyond its end (they cannot be its own).
func TestOffsetsWithoutStreamIdentity(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stored    func(streamLast uint64) uint64
		wantEpoch int
	}{
		{name: "fits: adopted", stored: func(last uint64) uint64 { return last }, wantEpoch: 0},
		{name: "beyond the end: reset", stored: func(last uint64) uint64 { return last + 100 }, wantEpoch: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t)
			cid := "ac_legacy"
			var last uint64
			for i := 1; i <= 4; i++ {
				last = s.client(cid, int32(i), &protocol.UserMessage{ID: fmt.Sprintf("am_legacy_%d", i), ConversationID: cid, Content: "x"}, nil)
			}
			// The first two were applied by a version that did not record the stream.
			if _, err := s.pool.Exec(context.Background(), `INSERT INTO alicia_stream_offsets (stream, consumer, last_seq) VALUES ($1, $2, $3)`,
				bus.StreamConversations, s.cfg.Consumer, int64(tt.stored(2))); err != nil {
				t.Fatal(err)
			}
			s.start()
			s.applied(bus.StreamConversations, last)
			_, created, epoch := s.offsetRow(bus.StreamConversations)
			if created == "" || epoch != tt.wantEpoch {
				t.Fatalf("created %q epoch %d, want a creation time and epoch %d", created, epoch, tt.wantEpoch)
			}
			want := 2 // the adopted offset skips the first two
			if tt.wantEpoch == 1 {
				want = 4
			}
			if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE conversation_id = $1`, cid); n != want {
				t.Fatalf("%d messages stored, want %d", n, want)
			}
		})
	}
}

package persistence_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestBacklogRefusedBeforeLoss: with persistence stopped, a client keeps
// writing to a 1 MiB CONVERSATIONS (DiscardOld) while an edge's
// backlog.Watcher is asked before each envelope. The watcher says refuse,
// naming the backlog and the limit, before the stream drops a single
// envelope persistence has not applied (FirstSeq ≤ applied+1 when refusal
// starts), from persistence's report written before it stopped. Once
// persistence is back and has caught up, it stops refusing, and every
// envelope written is in Postgres.
func TestBacklogRefusedBeforeLoss(t *testing.T) {
	streams := bus.DefaultStreams()
	streams.ConversationsMaxBytes = 1 << 20 // the owner ensures it so at its start
	s := newStackWith(t, streams)
	s.cfg.BacklogInterval = 20 * time.Millisecond
	ctx := t.Context()
	const cid = "ac_backlog"
	content := strings.Repeat("a flood of words ", 480) // ~8 KiB an envelope
	publish := func(i int) uint64 {
		return s.client(cid, int32(i+1), &protocol.UserMessage{ID: "am_backlog_" + strconv.Itoa(i), ConversationID: cid, Content: content}, nil)
	}
	s.start()
	first := publish(0)
	s.applied(bus.StreamConversations, first)
	w, err := backlog.Watch(ctx, s.js, backlog.Config{Interval: 10 * time.Millisecond, Log: testkit.Log()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	testkit.Eventually(t, 10*time.Second, func() bool { st := w.State(); return st.Reported && st.Applied >= first },
		"the watcher never read persistence's report of sequence %d", first)
	s.stop()

	var refusedAt backlog.State
	published := 1
	for ; published < 1000; published++ {
		if reason, retry, refuse := w.Refuse(); refuse {
			refusedAt = w.State()
			for _, want := range []string{"not stored yet", "50%", backlog.EnvLimit} {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q does not say %q", reason, want)
				}
			}
			if retry < time.Second || retry > time.Minute {
				t.Errorf("retry after %s, want 1s..1m", retry)
			}
			break
		}
		seq := publish(published)
		// The edge's next look sees this envelope (the watcher reads the
		// stream every 10 ms; an edge's every second, at most a second of
		// input beyond the limit).
		testkit.Eventually(t, 10*time.Second, func() bool { return w.State().LastSeq >= seq }, "the watcher never saw sequence %d", seq)
	}
	if refusedAt.LastSeq == 0 {
		t.Fatalf("still accepting after %d envelopes into a 1 MiB stream", published)
	}
	info := streamInfo(t, s.js)
	t.Logf("refused after %d envelopes: %+v; stream first %d, last %d, %d bytes", published, refusedAt, info.State.FirstSeq, info.State.LastSeq, info.State.Bytes)
	if info.State.FirstSeq > refusedAt.Applied+1 || info.State.FirstSeq != 1 {
		t.Fatalf("the stream dropped envelopes not applied (first sequence %d, applied %d) before the watcher refused", info.State.FirstSeq, refusedAt.Applied)
	}
	if refusedAt.Applied != first || refusedAt.LastSeq != uint64(published) {
		t.Errorf("refused at applied %d, last %d: want persistence's stale report %d and the last publish %d", refusedAt.Applied, refusedAt.LastSeq, first, published)
	}
	// Half the stream, and not much more: refusing starts at the limit.
	if refusedAt.UnappliedBytes < 1<<19 || refusedAt.UnappliedBytes > 1<<19+32<<10 {
		t.Errorf("refused with %d bytes not applied, want the first look at or over 512 KiB", refusedAt.UnappliedBytes)
	}

	s.start()
	testkit.Eventually(t, 30*time.Second, func() bool { _, _, refuse := w.Refuse(); return !refuse }, "still refusing after persistence restarted")
	// Accepting again means under the limit, not caught up: persistence
	// may still be applying the rest when the refusal ends.
	if st := w.State(); st.UnappliedBytes >= st.MaxBytes/2 {
		t.Errorf("accepting again with %d bytes not applied, at or over half of %d", st.UnappliedBytes, st.MaxBytes)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return w.State().Applied >= uint64(published) },
		"persistence never reported applying all %d envelopes", published)
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE conversation_id = $1`, cid); n != published {
		t.Fatalf("%d messages in Postgres, want every one of the %d published", n, published)
	}
}

func streamInfo(t *testing.T, js jetstream.JetStream) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo()
}

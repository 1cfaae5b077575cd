package persistence_test

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/svcmain/svcmaintest"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// drainLimit bounds a drain in these tests: the service's shutdown timeout
// plus a generous margin for a loaded machine.
const drainLimit = 60 * time.Second

// TestDrainCommitsTheBatchItHolds sends SIGTERM to the persistence binary
// while it applies a batch (its transaction waits for a row lock the test
// holds): the service reports draining, takes nothing published after the
// signal, commits the batch once the lock is released and exits 0. A second
// instance then applies what the first left, and every message is stored
// once.
func TestDrainCommitsTheBatchItHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	s := newStack(t)
	bin := svcmaintest.Build(t, "./cmd/persistence")
	addr := testkit.FreeAddr(t)
	env := []string{"ALICIA_NATS_URL=" + s.cfg.NATSURL, "ALICIA_POSTGRES_URL=" + s.cfg.PostgresURL,
		"ALICIA_LOG_LEVEL=warn", "ALICIA_SHUTDOWN_TIMEOUT=30s"}
	first := svcmaintest.Start(t, bin, append(env, "ALICIA_PERSISTENCE_METRICS_ADDR="+addr)...)

	const cid = "ac_drain"
	user := func(n string) *protocol.UserMessage {
		return &protocol.UserMessage{ID: "am_drain" + n, ConversationID: cid, Content: "message " + n}
	}
	seq1 := s.client(cid, 1, user("1"), nil)
	s.applied(bus.StreamConversations, seq1)

	// Hold the offsets row: the next batch's transaction waits for it.
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM alicia_stream_offsets WHERE stream = $1 FOR UPDATE`, bus.StreamConversations); err != nil {
		t.Fatal(err)
	}
	seq2 := s.client(cid, 2, user("2"), nil)
	testkit.Eventually(t, 30*time.Second, func() bool {
		return s.queryInt(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`) > 0
	}, "the batch never reached the database")

	first.Signal(syscall.SIGTERM)
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusServiceUnavailable, "draining"),
		"/healthz does not report draining")
	seq3 := s.client(cid, 3, user("3"), nil) // after the signal: not this instance's
	select {
	case <-first.Exited():
		t.Fatal("persistence exited while its batch was still being applied")
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if code := first.Wait(drainLimit); code != 0 {
		t.Fatalf("persistence exited %d after SIGTERM, want 0", code)
	}
	if got := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE id = 'am_drain2'`); got != 1 {
		t.Fatalf("the batch held at SIGTERM was not committed: %d rows of am_drain2", got)
	}
	if got := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE id = 'am_drain3'`); got != 0 {
		t.Fatal("the draining instance applied a message published after the signal")
	}
	if off := s.queryInt(`SELECT last_seq FROM alicia_stream_offsets WHERE stream = $1`, bus.StreamConversations); uint64(off) < seq2 || uint64(off) >= seq3 {
		t.Fatalf("stored offset %d, want the committed batch's (≥ %d, < %d)", off, seq2, seq3)
	}

	second := svcmaintest.Start(t, bin, env...)
	s.applied(bus.StreamConversations, seq3)
	second.Stop(drainLimit)
	if got := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE conversation_id = $1`, cid); got != 3 {
		t.Fatalf("%d messages stored, want 3, each once", got)
	}
}

package memory_test

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/svcmain/svcmaintest"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

// TestDrainFinishesWhatIsInFlight sends SIGTERM to the memory binary while
// its (fake, slow) embeddings backend embeds a memory.action request and a
// client MemoryAction: /healthz reports draining, the request is answered
// and the action confirmed, a request sent after the signal finds no
// responder, the process exits 0, and a client MemoryAction published after
// the signal is done by another replica; every memory is embedded once.
func TestDrainFinishesWhatIsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	pgURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	persistencetest.Start(t, ns.ClientURL(), pgURL)
	slow := fakeopenai.New(t)
	p := slow.Profile()
	p.Embeddings = fakeopenai.EmbeddingsTiming{Fixed: 3 * time.Second}
	slow.SetProfile(p)
	s := &stack{t: t, nc: nc, js: js, pub: bus.NewPublisher(js), pool: pool, ai: slow}

	addr := testkit.FreeAddr(t)
	bin := svcmaintest.Build(t, "./cmd/memory")
	proc := svcmaintest.Start(t, bin, "ALICIA_NATS_URL="+ns.ClientURL(), "ALICIA_POSTGRES_URL="+pgURL,
		"ALICIA_EMBEDDING_URL="+slow.URL(), "ALICIA_EMBEDDING_MODEL=fake-embedding", "ALICIA_EMBEDDING_TIMEOUT=30s",
		"ALICIA_MEMORY_EXTRACTION=false", "ALICIA_MEMORY_METRICS_ADDR="+addr, "ALICIA_SHUTDOWN_TIMEOUT=40s", "ALICIA_LOG_LEVEL=warn")
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusOK, "ok"), "memory ready")

	// In flight at the signal: a memory.action request and a client action.
	cid := "ac_drain"
	events := s.listen(cid)
	type reply struct {
		resp rpc.MemoryActionResponse
		err  error
	}
	replied := make(chan reply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		resp, err := rpc.MemoryAct(ctx, nc, rpc.MemoryActionRequest{UserID: "alice", Action: protocol.MemoryAction{
			ID: protocol.NewID("amact"), Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
			Memory: &protocol.MemoryActionMemory{Content: "The user asked while the service stopped."}}})
		replied <- reply{resp, err}
	}()
	s.client(cid, "alice", 1, &protocol.MemoryAction{ID: "amem_inflight", Action: protocol.MemoryActionActionCreate,
		Timestamp: time.Now().UnixMilli(), Memory: &protocol.MemoryActionMemory{Content: "The user plays the oboe."}})
	testkit.Eventually(t, 30*time.Second, func() bool { return slow.Active() == 2 }, "both reached the embeddings backend")

	proc.Signal(syscall.SIGTERM)
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusServiceUnavailable, "draining"),
		"/healthz does not report draining")
	// Nothing new: the service is gone from the bus, the consumer pulls no more.
	testkit.Eventually(t, 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := rpc.MemorySearch(ctx, nc, rpc.MemorySearchRequest{UserID: "alice"})
		return errors.Is(err, rpc.ErrNoResponders)
	}, "memory.search still answered after the signal")
	s.client(cid, "alice", 2, &protocol.MemoryAction{ID: "amem_later", Action: protocol.MemoryActionActionCreate,
		Timestamp: time.Now().UnixMilli(), Memory: &protocol.MemoryActionMemory{Content: "The user sent this after the signal."}})

	r := <-replied
	if r.err != nil || r.resp.MemoryID == "" {
		t.Fatalf("memory.action in flight at the signal: %+v, %v", r.resp, r.err)
	}
	if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success || conf.MemoryID != "amem_inflight" {
		t.Fatalf("confirmation = %+v, want amem_inflight's", conf)
	}
	if code := proc.Wait(90 * time.Second); code != 0 {
		t.Fatalf("memory exited %d after SIGTERM, want 0", code)
	}
	for _, id := range []string{r.resp.MemoryID, "amem_inflight"} {
		if row, ok := s.row(id); !ok || !row.HasEmbedding {
			t.Fatalf("memory %s: %+v (found %v), want it stored with its embedding", id, row, ok)
		}
	}
	if n := len(slow.EmbeddingRequests()); n != 2 {
		t.Fatalf("the draining replica made %d embedding requests, want 2 (nothing taken after the signal)", n)
	}

	// Another replica does the action published after the signal, once.
	fast := fakeopenai.New(t)
	cfg := memory.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL, cfg.EmbeddingURL, cfg.EmbeddingModel, cfg.Extraction = ns.ClientURL(), pgURL, fast.URL(), "fake-embedding", false
	testkit.Go(t, "memory", func(ctx context.Context) error { return memory.Run(ctx, cfg, testLogger(t)) })
	if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success || conf.MemoryID != "amem_later" {
		t.Fatalf("confirmation = %+v, want amem_later's", conf)
	}
	if row, ok := s.row("amem_later"); !ok || !row.HasEmbedding {
		t.Fatalf("amem_later: %+v (found %v)", row, ok)
	}
	if n := len(fast.EmbeddingRequests()); n != 1 {
		t.Fatalf("the other replica made %d embedding requests, want 1", n)
	}
}

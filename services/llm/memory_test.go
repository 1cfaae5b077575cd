package llm_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// memoryService answers memory.search the way the memory service does, with
// what the test gives it.
type memoryService struct {
	mu       sync.Mutex
	requests []rpc.MemorySearchRequest
	answer   func(rpc.MemorySearchRequest, micro.Request)
}

func (h *harness) memoryService(t *testing.T, answer func(rpc.MemorySearchRequest, micro.Request)) *memoryService {
	t.Helper()
	ms := &memoryService{answer: answer}
	svc, err := micro.AddService(h.nc, micro.Config{Name: "test-memory", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("search", micro.HandlerFunc(func(r micro.Request) {
		var req rpc.MemorySearchRequest
		if !rpc.Decode(r, &req) {
			return
		}
		ms.mu.Lock()
		ms.requests = append(ms.requests, req)
		ms.mu.Unlock()
		ms.answer(req, r)
	}), micro.WithEndpointSubject(rpc.MemorySearchSubject))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func (h *harness) createMemory(t *testing.T, id, content string) {
	t.Helper()
	env := protocol.New("", &protocol.MemoryAction{ID: protocol.NewID("amema"), Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: content}})
	env.Meta = map[string]any{edge.MetaUserID: testUser}
	if _, err := h.pub.PublishSystem(context.Background(), env, id); err != nil {
		t.Fatal(err)
	}
}

// Memories found for the user go into the prompt, each announced by a
// MemoryTrace after StartAnswer and recorded in alicia_memory_used.
func TestMemoryTurn(t *testing.T) {
	h := newHarness(t)
	h.createMemory(t, "amem_tea", "The user prefers green tea.")
	h.createMemory(t, "amem_cat", "The user has a cat called Miso.")
	ms := h.memoryService(t, func(req rpc.MemorySearchRequest, r micro.Request) {
		if req.UserID != testUser {
			rpc.Respond(r, rpc.MemorySearchResponse{Enabled: true})
			return
		}
		rpc.Respond(r, rpc.MemorySearchResponse{Enabled: true, Memories: []rpc.Memory{
			{ID: "amem_tea", Content: "The user prefers green tea.", Similarity: 0.91},
			{ID: "amem_cat", Content: "The user has a cat called Miso.", Similarity: 0.62},
		}, EmbeddingModel: "bge-m3", TopK: 5, Threshold: 0.35, Prefetched: true})
	})
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Text("Green tea, as usual?"))
	uid := h.say(cid, "what should I drink?")
	sa, _, envs := w.answered(t, uid)

	var startSeq uint64
	var traces []*protocol.MemoryTrace
	for _, s := range envs {
		switch b := s.Env.Body.(type) {
		case *protocol.StartAnswer:
			if b.ID == sa.ID {
				startSeq = s.Seq
			}
		case *protocol.MemoryTrace:
			if startSeq == 0 {
				t.Fatal("MemoryTrace before StartAnswer")
			}
			traces = append(traces, b)
		}
	}
	if len(traces) != 2 || traces[0].MemoryID != "amem_tea" || traces[0].MessageID != sa.ID || traces[0].Relevance != 0.91 ||
		traces[0].Content != "The user prefers green tea." || traces[1].MemoryID != "amem_cat" {
		t.Fatalf("traces %+v", traces)
	}
	// Each trace says which search found the memory.
	for _, tr := range traces {
		meta := tr.QueryPromptMeta
		if tr.QueryPrompt == nil || *tr.QueryPrompt != "what should I drink?" || meta["embeddingModel"] != "bge-m3" ||
			meta["limit"] != int64(5) || meta["threshold"] != 0.35 || meta["prefetched"] != true || meta["candidates"] != int64(2) {
			t.Fatalf("trace %s: queryPrompt %v meta %#v", tr.MemoryID, tr.QueryPrompt, meta)
		}
		if ms, ok := meta["searchMs"].(float64); !ok || ms < 0 {
			t.Fatalf("trace %s: searchMs %#v", tr.MemoryID, meta["searchMs"])
		}
	}
	ms.mu.Lock()
	req := ms.requests[0]
	ms.mu.Unlock()
	if req.Query != "what should I drink?" || req.TopK != 5 {
		t.Fatalf("memory.search request %+v", req)
	}
	sys := h.fake.Requests()[0].Messages[0].Content
	if !strings.Contains(sys, "- The user prefers green tea.") || !strings.Contains(sys, "- The user has a cat called Miso.") {
		t.Fatalf("system prompt without the memories: %q", sys)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		var n int
		var best float64
		_ = h.pool.QueryRow(context.Background(), `SELECT count(*), COALESCE(max(similarity_score), 0) FROM alicia_memory_used WHERE message_id = $1`, sa.ID).Scan(&n, &best)
		return n == 2 && best > 0.9
	}, "memory_used rows")
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_memory_used WHERE message_id = $1 AND query_prompt = 'what should I drink?'
		AND query_prompt_meta->>'embeddingModel' = 'bge-m3' AND (query_prompt_meta->>'prefetched')::bool AND query_prompt_meta ? 'searchMs'`, sa.ID).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d memory_used rows with the query (%v), want 2", n, err)
	}
}

// Without a working memory service a turn is answered without memories.
func TestMemoryUnavailable(t *testing.T) {
	h := newHarness(t)
	var mode string
	var mu sync.Mutex
	h.memoryService(t, func(_ rpc.MemorySearchRequest, r micro.Request) {
		mu.Lock()
		m := mode
		mu.Unlock()
		switch m {
		case "error":
			rpc.Fail(r, rpc.CodeUnavailable, "embeddings backend down")
		case "slow":
			time.Sleep(2 * time.Second) // a memory service that answers too late
			rpc.Respond(r, rpc.MemorySearchResponse{Enabled: true})
		case "off":
			rpc.Respond(r, rpc.MemorySearchResponse{Enabled: false})
		}
	})
	cfg := h.config(h.fake)
	cfg.MemoryTimeout = 200 * time.Millisecond
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	for _, m := range []string{"error", "slow", "off"} {
		t.Run(m, func(t *testing.T) {
			mu.Lock()
			mode = m
			mu.Unlock()
			h.fake.Enqueue(fakeopenai.Text("Answered anyway."))
			start := time.Now()
			_, sents, envs := w.answered(t, h.say(cid, "hi "+m))
			if len(sents) != 1 || sents[0].Text != "Answered anyway." || len(bodies[*protocol.MemoryTrace](envs)) != 0 {
				t.Fatalf("sentences %+v", sents)
			}
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Fatalf("answer took %s: the memory lookup was not cut short", d)
			}
		})
	}
}

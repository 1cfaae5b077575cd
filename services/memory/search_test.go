package memory_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory"
)

const query = "favourite drink espresso coffee"

func TestSearch(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	// Similarities to the query with the fake's bag-of-words embeddings:
	// exact 1.0, tea 0.75, water 0.5, colour 0.31, cat ≈ 0.
	exact := s.create("alice", "favourite drink espresso coffee", []string{"drinks"}, 0.5)
	tea := s.create("alice", "favourite drink espresso tea", nil, 0.5)
	water := s.create("alice", "favourite drink water juice", nil, 0.5)
	s.create("alice", "favourite colour green blue", nil, 0.5)
	cat := s.create("alice", "the user owns a cat named Miso", []string{"pets"}, 0.9)
	dog := s.create("alice", "the user walks the dog at seven", nil, 0.4)
	bobs := s.create("bob", "favourite drink espresso coffee", nil, 0.5)
	archived := s.create("alice", "favourite drink espresso coffee archived", nil, 0.5)
	deleted := s.create("alice", "favourite drink espresso coffee deleted", nil, 0.5)
	for _, c := range []struct {
		id     string
		action protocol.MemoryActionAction
	}{{cat, protocol.MemoryActionActionPin}, {dog, protocol.MemoryActionActionPin},
		{archived, protocol.MemoryActionActionArchive}, {deleted, protocol.MemoryActionActionDelete}} {
		if _, err := s.act("alice", c.action, &protocol.MemoryActionMemory{ID: &c.id}); err != nil {
			t.Fatalf("%s %s: %v", c.action, c.id, err)
		}
	}

	for _, c := range []struct {
		name string
		req  rpc.MemorySearchRequest
		want []string
	}{
		{"pinned first then matches above the threshold", rpc.MemorySearchRequest{UserID: "alice", Query: query},
			[]string{cat, dog, exact, tea, water}},
		{"top-k caps pinned and matches", rpc.MemorySearchRequest{UserID: "alice", Query: query, TopK: 1},
			[]string{cat, exact}},
		{"threshold", rpc.MemorySearchRequest{UserID: "alice", Query: query, Threshold: 0.7},
			[]string{cat, dog, exact, tea}},
		{"other user's memories excluded", rpc.MemorySearchRequest{UserID: "bob", Query: query},
			[]string{bobs}},
		{"unknown user", rpc.MemorySearchRequest{UserID: "carol", Query: query}, nil},
		{"empty query matches nothing", rpc.MemorySearchRequest{UserID: "alice", Query: "  "}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := s.search(c.req)
			if !resp.Enabled {
				t.Fatal("search is off")
			}
			if got := ids(resp.Memories); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}

	t.Run("similarities and fields", func(t *testing.T) {
		resp := s.search(rpc.MemorySearchRequest{UserID: "alice", Query: query})
		want := map[string]float64{exact: 1, tea: 0.75, water: 0.5}
		for _, m := range resp.Memories {
			if w, ok := want[m.ID]; ok && math.Abs(m.Similarity-w) > 0.01 {
				t.Errorf("%s similarity %.3f, want %.2f", m.Content, m.Similarity, w)
			}
			if m.ID == cat && (!m.Pinned || m.Importance != 0.9 || len(m.Tags) != 1 || m.Tags[0] != "pets" || m.CreatedAt == 0) {
				t.Errorf("pinned memory = %+v", m)
			}
			if m.Archived {
				t.Errorf("archived memory returned: %+v", m)
			}
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, req := range []rpc.MemorySearchRequest{
			{Query: query},
			{UserID: "alice", Query: query, Threshold: 1.5},
			{UserID: "alice", Query: query, TopK: -1},
		} {
			if _, err := rpc.MemorySearch(s.ctx(), s.nc, req); !rpc.IsCode(err, rpc.CodeBadRequest) {
				t.Errorf("%+v: err = %v, want 400", req, err)
			}
		}
	})
}

func ids(ms []rpc.Memory) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestSearchOffWithoutEmbeddings(t *testing.T) {
	s := newStack(t, stackOptions{noEmbeddings: true})
	id := s.create("alice", query, nil, 0.5)
	resp := s.search(rpc.MemorySearchRequest{UserID: "alice", Query: query})
	if resp.Enabled || len(resp.Memories) != 0 {
		t.Fatalf("search without embeddings = %+v, want off and empty", resp)
	}
	if r, ok := s.row(id); !ok || r.HasEmbedding || r.Content != query {
		t.Fatalf("memory created without embeddings = %+v (found %v), want stored without an embedding", r, ok)
	}
	if n := len(s.ai.EmbeddingRequests()); n != 0 {
		t.Fatalf("%d embedding requests without an embeddings URL", n)
	}
	// Extraction needs embeddings: its consumer is not even created.
	if _, err := s.js.Consumer(s.ctx(), "CONVERSATIONS", s.cfg.ExtractionConsumer); err != jetstream.ErrConsumerNotFound {
		t.Fatalf("extraction consumer: %v, want not found", err)
	}
}

func TestEmbeddingsBackendFailures(t *testing.T) {
	t.Run("down", func(t *testing.T) {
		s := newStack(t, stackOptions{noLLM: true})
		s.ai.SetFault(fakeopenai.Fault{Down: true})
		_, err := rpc.MemorySearch(s.ctx(), s.nc, rpc.MemorySearchRequest{UserID: "alice", Query: query})
		if !rpc.IsCode(err, rpc.CodeUnavailable) {
			t.Fatalf("search with the backend down: %v, want 503", err)
		}
		if n := len(s.ai.EmbeddingRequests()); n != 3 {
			t.Errorf("%d embedding attempts, want 3 (two retries)", n)
		}
		_, err = s.act("alice", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{Content: query})
		if !rpc.IsCode(err, rpc.CodeUnavailable) {
			t.Fatalf("create with the backend down: %v, want 503", err)
		}
		if n := s.count(`SELECT count(*) FROM alicia_memory`); n != 0 {
			t.Fatalf("%d memories stored while the backend was down", n)
		}
		s.ai.SetFault(fakeopenai.Fault{})
		s.create("alice", query, nil, 0.5)
		if resp := s.search(rpc.MemorySearchRequest{UserID: "alice", Query: query}); len(resp.Memories) != 1 {
			t.Fatalf("after recovery: %+v", resp)
		}
	})
	t.Run("transient 5xx is retried", func(t *testing.T) {
		s := newStack(t, stackOptions{noLLM: true})
		s.create("alice", query, nil, 0.5)
		s.ai.FailNext(2, 502)
		if resp := s.search(rpc.MemorySearchRequest{UserID: "alice", Query: query}); len(resp.Memories) != 1 {
			t.Fatalf("search after two 502s: %+v", resp)
		}
	})
	t.Run("hung backend times out", func(t *testing.T) {
		s := newStack(t, stackOptions{noLLM: true, config: func(c *memory.Config) { c.EmbeddingTimeout = 100 * time.Millisecond }})
		s.ai.SetFault(fakeopenai.Fault{Hang: true})
		start := time.Now()
		_, err := rpc.MemorySearch(s.ctx(), s.nc, rpc.MemorySearchRequest{UserID: "alice", Query: query})
		if !rpc.IsCode(err, rpc.CodeUnavailable) || time.Since(start) > 5*time.Second {
			t.Fatalf("search with a hung backend: %v after %s, want 503 soon", err, time.Since(start))
		}
	})
	t.Run("wrong dimensions", func(t *testing.T) {
		s := newStack(t, stackOptions{noLLM: true, fake: []fakeopenai.Option{fakeopenai.WithDims(768)}})
		_, err := rpc.MemorySearch(s.ctx(), s.nc, rpc.MemorySearchRequest{UserID: "alice", Query: query})
		var e *rpc.Error
		if !rpc.IsCode(err, rpc.CodeUnavailable) || !errors.As(err, &e) || !strings.Contains(e.Description, "768 dimensions") {
			t.Fatalf("search with 768-dimension embeddings: %v, want 503 naming the size", err)
		}
		if n := len(s.ai.EmbeddingRequests()); n != 1 {
			t.Errorf("%d attempts; a wrong size is not retried", n)
		}
	})
}

package tools_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// fakeMemory serves memory.search as the memory service would.
type fakeMemory struct {
	mu       sync.Mutex
	requests []rpc.MemorySearchRequest
	answer   func(micro.Request)
}

func serveMemory(t *testing.T, nc *nats.Conn, answer func(micro.Request)) *fakeMemory {
	t.Helper()
	f := &fakeMemory{answer: answer}
	svc, err := micro.AddService(nc, micro.Config{
		Name:    "alicia-memory",
		Version: "0.0.1",
		Endpoint: &micro.EndpointConfig{Subject: rpc.MemorySearchSubject, Handler: micro.HandlerFunc(func(r micro.Request) {
			var req rpc.MemorySearchRequest
			if !rpc.Decode(r, &req) {
				return
			}
			f.mu.Lock()
			f.requests = append(f.requests, req)
			answer := f.answer
			f.mu.Unlock()
			answer(r)
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return f
}

func TestMemoryQuery(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	mem := serveMemory(t, nc, func(r micro.Request) {
		rpc.Respond(r, rpc.MemorySearchResponse{Enabled: true, Memories: []rpc.Memory{
			{ID: "amem_1", Content: "The user's dog is called Pixel.", Tags: []string{"pets"}, Similarity: 0.91, Pinned: true},
			{ID: "amem_2", Content: "The user lives in Lyon.", Similarity: 0.55},
		}})
	})
	q := tools.NewMemoryQuery(nc)
	got, err := q.Call(testContext(t), tools.Invocation{UserID: "user_7"}, map[string]any{"query": "dog's name", "limit": 3.0})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"id": "amem_1", "content": "The user's dog is called Pixel.", "similarity": 0.91, "tags": []any{"pets"}},
		map[string]any{"id": "amem_2", "content": "The user lives in Lyon.", "similarity": 0.55, "tags": []any{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	mem.mu.Lock()
	req := mem.requests[0]
	mem.mu.Unlock()
	if req.UserID != "user_7" || req.Query != "dog's name" || req.TopK != 3 {
		t.Fatalf("memory.search got %+v", req)
	}

	// The default limit, and a service that returns more than asked.
	mem.mu.Lock()
	mem.answer = func(r micro.Request) {
		ms := make([]rpc.Memory, 9)
		for i := range ms {
			ms[i] = rpc.Memory{ID: "amem_x", Content: "x"}
		}
		rpc.Respond(r, rpc.MemorySearchResponse{Enabled: true, Memories: ms})
	}
	mem.mu.Unlock()
	got, err = q.Call(testContext(t), tools.Invocation{UserID: "user_7"}, map[string]any{"query": "anything"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.([]any)); n != 5 {
		t.Fatalf("%d memories, want the default 5", n)
	}
	mem.mu.Lock()
	topK := mem.requests[1].TopK
	mem.mu.Unlock()
	if topK != 5 {
		t.Fatalf("topK = %d, want 5", topK)
	}
}

func TestMemoryQueryFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(micro.Request) // nil: no memory service
		inv     tools.Invocation
		is      error
		message string
	}{
		{"memory service not running", nil, tools.Invocation{UserID: "u"}, tools.ErrMemoryUnavailable, "long-term memory is unavailable: the memory service is not running"},
		{"memory service failing", func(r micro.Request) { rpc.Fail(r, rpc.CodeUnavailable, "postgres: connection refused") },
			tools.Invocation{UserID: "u"}, tools.ErrMemoryUnavailable, "postgres: connection refused"},
		{"no embeddings backend", func(r micro.Request) { rpc.Respond(r, rpc.MemorySearchResponse{Enabled: false}) },
			tools.Invocation{UserID: "u"}, tools.ErrMemorySearchOff, "search is off"},
		{"no user", func(r micro.Request) { rpc.Respond(r, rpc.MemorySearchResponse{Enabled: true}) },
			tools.Invocation{}, tools.ErrNoUser, "no user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := natstest.Connect(t, natstest.Run(t))
			if tc.answer != nil {
				serveMemory(t, nc, tc.answer)
			}
			start := time.Now()
			_, err := tools.NewMemoryQuery(nc).Call(testContext(t), tc.inv, map[string]any{"query": "dog"})
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want %v saying %q", err, tc.is, tc.message)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %s", d)
			}
		})
	}
}

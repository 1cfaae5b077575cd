package memory_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/memory/internal/metrics"
)

var outcomes = []string{"hit", "miss", "stale", "failed"}

// say publishes a client's UserMessage in cid as user (as the gateway does)
// and waits until the memory service has begun its search (the fake has
// the embeddings request of its text).
func (s *stack) say(cid, user string, stanza int32, text string) {
	s.t.Helper()
	before := s.embedded(text)
	s.client(cid, user, stanza, &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: text})
	testkit.Eventually(s.t, 10*time.Second, func() bool { return s.embedded(text) > before }, "the prefetched search of %q", text)
}

// embedded counts the embeddings requests for text.
func (s *stack) embedded(text string) int {
	n := 0
	for _, r := range s.ai.EmbeddingRequests() {
		if slices.Contains(r.Input, text) {
			n++
		}
	}
	return n
}

// searched is a search and what the prefetch gave it (the metric's outcome).
func (s *stack) searched(req rpc.MemorySearchRequest) (rpc.MemorySearchResponse, string) {
	s.t.Helper()
	return s.searchedWith(req, func() rpc.MemorySearchResponse { return s.search(req) })
}

// searchedWith runs search and reports the prefetch outcome it counted.
func (s *stack) searchedWith(req rpc.MemorySearchRequest, search func() rpc.MemorySearchResponse) (rpc.MemorySearchResponse, string) {
	s.t.Helper()
	count := func() map[string]float64 {
		m := map[string]float64{}
		for _, o := range outcomes {
			m[o] = testutil.ToFloat64(metrics.Default().SearchPrefetch.WithLabelValues(o))
		}
		return m
	}
	before := count()
	resp := search()
	after := count()
	got := ""
	for _, o := range outcomes {
		if d := after[o] - before[o]; d == 1 && got == "" {
			got = o
		} else if d != 0 {
			s.t.Fatalf("search %+v: outcome counts moved by %v", req, after)
		}
	}
	return resp, got
}

// searchedFor is searched, asked as the llm asks for user message msgID.
func (s *stack) searchedFor(msgID string, req rpc.MemorySearchRequest) (rpc.MemorySearchResponse, string) {
	s.t.Helper()
	return s.searchedWith(req, func() rpc.MemorySearchResponse {
		resp, err := rpc.MemorySearchFor(s.ctx(), s.nc, msgID, req)
		if err != nil {
			s.t.Fatalf("search for %s %+v: %v", msgID, req, err)
		}
		return resp
	})
}

func (s *stack) expect(req rpc.MemorySearchRequest, outcome string) rpc.MemorySearchResponse {
	s.t.Helper()
	resp, got := s.searched(req)
	if got != outcome {
		s.t.Fatalf("search %+v: prefetch %q, want %q", req, got, outcome)
	}
	return resp
}

// sysAction publishes a MemoryAction of user on alicia.sys.memory_action
// as another memory replica would (this one never learns it was applied)
// and waits until persistence has applied it.
func (s *stack) sysAction(user string, act *protocol.MemoryAction) {
	s.t.Helper()
	env := protocol.Envelope{Type: protocol.TypeMemoryAction, Meta: map[string]any{metaUser: user}, Body: act}
	ack, err := s.pub.PublishSystem(s.ctx(), env, act.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := rpc.WaitApplied(s.ctx(), s.nc, "SYSTEM", ack.Sequence); err != nil {
		s.t.Fatal(err)
	}
}

func embedding(text string) []float64 {
	var out []float64
	for _, f := range fakeopenai.Embed(text, memory.Dimensions) {
		out = append(out, float64(f))
	}
	return out
}

// TestPrefetchedSearch: the llm's memory.search for a user message is
// answered from the search started when the message was published, with
// what a search made then returns; another user, another query or other
// limits get nothing from it, and a memory write of the user after it
// began (from memory.action, a client or another replica) makes the
// request search again and see the write.
func TestPrefetchedSearch(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	cid := "ac_prefetch"
	coffee := s.create("alice", "favourite drink espresso coffee", nil, 0.5)
	pinned := s.create("alice", "the user owns a cat named Miso", nil, 0.9)
	if _, err := s.act("alice", protocol.MemoryActionActionPin, &protocol.MemoryActionMemory{ID: &pinned}); err != nil {
		t.Fatal(err)
	}
	bobs := s.create("bob", "favourite drink espresso tea", nil, 0.5)
	q := "what is my favourite drink espresso"
	alice := rpc.MemorySearchRequest{UserID: "alice", Query: q, TopK: 5}

	// Cold: nothing prefetched for this request.
	cold := s.expect(alice, "miss")
	if got := ids(cold.Memories); !slices.Equal(got, []string{pinned, coffee}) {
		t.Fatalf("cold search %v, want %v", got, []string{pinned, coffee})
	}
	s.say(cid, "alice", 1, q)
	embeds := s.embedded(q)
	hot := s.expect(alice, "hit")
	// The same answer, except that it says it was prefetched.
	if !hot.Prefetched || cold.Prefetched {
		t.Fatalf("prefetched %v (hit) and %v (cold), want true and false", hot.Prefetched, cold.Prefetched)
	}
	if !reflect.DeepEqual(withoutQuery(hot), withoutQuery(cold)) {
		t.Fatalf("prefetched answer %+v differs from the cold search %+v", hot, cold)
	}
	if n := s.embedded(q); n != embeds {
		t.Fatalf("the hit embedded the query again (%d requests, %d before)", n, embeds)
	}
	// The request's defaults resolve to the same key: hits too; another
	// query or another user does not (other limits: TestPrefetchLimits).
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: "  " + q + " ", Threshold: 0.35}, "hit")
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: q + "?"}, "miss")

	t.Run("another user gets nothing of it", func(t *testing.T) {
		s.say(cid, "alice", 2, "favourite drink espresso please")
		resp := s.expect(rpc.MemorySearchRequest{UserID: "bob", Query: "favourite drink espresso please"}, "miss")
		if got := ids(resp.Memories); !slices.Equal(got, []string{bobs}) {
			t.Fatalf("bob's search %v, want only his memory %s", got, bobs)
		}
		s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: "favourite drink espresso please"}, "hit")
	})

	t.Run("memory.action", func(t *testing.T) {
		text := "favourite drink espresso in the morning"
		s.say(cid, "alice", 3, text)
		added := s.create("alice", "favourite drink espresso morning ritual", nil, 0.5)
		req := rpc.MemorySearchRequest{UserID: "alice", Query: text}
		resp := s.expect(req, "stale")
		if !slices.Contains(ids(resp.Memories), added) {
			t.Fatalf("after the write %v lacks the new memory %s", ids(resp.Memories), added)
		}
		// The stale entry gave its embedding: the query was embedded once.
		if n := s.embedded(text); n != 1 {
			t.Fatalf("%d embeddings of the query, want 1", n)
		}
		if again := s.expect(req, "stale"); !reflect.DeepEqual(withoutQuery(again), withoutQuery(resp)) {
			t.Fatalf("a second search %v differs from %v", ids(again.Memories), ids(resp.Memories))
		}
		// The service's own write is known applied: the next message's
		// search is used again.
		s.say(cid, "alice", 4, text+" again")
		if resp := s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text + " again"}, "hit"); !slices.Contains(ids(resp.Memories), added) {
			t.Fatalf("%v lacks %s", ids(resp.Memories), added)
		}
		// Deleted: gone from the answer.
		s.say(cid, "alice", 5, text)
		if _, err := s.act("alice", protocol.MemoryActionActionDelete, &protocol.MemoryActionMemory{ID: &added}); err != nil {
			t.Fatal(err)
		}
		if resp := s.expect(req, "stale"); slices.Contains(ids(resp.Memories), added) {
			t.Fatalf("deleted memory %s still found", added)
		}
	})

	t.Run("a client's memory action", func(t *testing.T) {
		events := s.listen(cid)
		text := "favourite drink espresso after lunch"
		s.say(cid, "alice", 6, text)
		s.client(cid, "alice", 7, &protocol.MemoryAction{ID: "amem_lunch", Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
			Memory: &protocol.MemoryActionMemory{Content: "favourite drink espresso after lunch"}})
		if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success {
			t.Fatalf("confirmation %+v", conf)
		}
		if resp := s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text}, "stale"); !slices.Contains(ids(resp.Memories), "amem_lunch") {
			t.Fatalf("%v lacks the client's memory", ids(resp.Memories))
		}
		s.say(cid, "alice", 8, text+" today")
		s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text + " today"}, "hit")
	})

	t.Run("another replica's write", func(t *testing.T) {
		text := "favourite drink espresso at night"
		s.say(cid, "alice", 9, text)
		id := "amem_night"
		s.sysAction("alice", &protocol.MemoryAction{ID: "amact_night", Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
			Memory: &protocol.MemoryActionMemory{ID: &id, Content: "favourite drink espresso at night", Embedding: embedding("favourite drink espresso at night")}})
		if resp := s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text}, "stale"); !slices.Contains(ids(resp.Memories), id) {
			t.Fatalf("%v lacks %s", ids(resp.Memories), id)
		}
		// This replica cannot know when persistence applied it: alice's
		// searches begun within the settle time are not used (bob's are).
		s.say(cid, "alice", 10, text+" too")
		s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text + " too"}, "stale")
		s.say(cid, "bob", 11, text+" too")
		s.expect(rpc.MemorySearchRequest{UserID: "bob", Query: text + " too"}, "hit")
	})
}

// TestPrefetchLimits: a prefetched search answers only a request with its
// top-k and threshold. A turn's request with other limits (the llm
// configured otherwise than the memory service's defaults) misses and
// teaches the prefetch its limits, so the next message's search is used;
// a request with a query of its own (the memory tool's) teaches nothing.
func TestPrefetchLimits(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	coffee := s.create("alice", "favourite drink espresso coffee", nil, 0.5)
	say := func(n int) (string, rpc.MemorySearchRequest) {
		text := fmt.Sprintf("favourite drink espresso coffee %d", n)
		s.say("ac_limits", "alice", int32(n), text)
		return text, rpc.MemorySearchRequest{UserID: "alice", Query: text}
	}
	text, def := say(1)
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text, TopK: 1, Threshold: 0.2}, "miss")
	s.expect(def, "hit") // the entry made with the defaults still serves its own limits

	_, def = say(2) // prefetched with top-k 1, threshold 0.2
	s.expect(def, "miss")
	text, _ = say(3) // the defaults again: the request above taught them back
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text}, "hit")

	text, _ = say(4)
	narrow := rpc.MemorySearchRequest{UserID: "alice", Query: text, TopK: 1, Threshold: 0.2}
	s.expect(narrow, "miss")
	text, _ = say(5)
	narrow.Query = text
	if resp := s.expect(narrow, "hit"); !slices.Equal(ids(resp.Memories), []string{coffee}) {
		t.Fatalf("the prefetched search with the turn's limits gave %v, want %v", ids(resp.Memories), []string{coffee})
	}

	// The memory tool's search: its own query, other limits; no lesson.
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: "coffee", TopK: 3}, "miss")
	text, _ = say(6)
	narrow.Query = text
	s.expect(narrow, "hit")
}

// TestPrefetchAnyReplica: with two memory replicas, one begins each
// message's search; the turn's request (rpc.MemorySearchFor, as the llm
// asks) reaches that one, so every request is a hit, while a plain
// memory.search is spread over both. A message nobody searched falls back
// to memory.search.
func TestPrefetchAnyReplica(t *testing.T) {
	// The replica that does not make the memory below cannot know when it
	// is applied and leaves alice's searches unused for the settle time:
	// 1 ms here (memory.action answers once persistence has applied it,
	// well after both replicas heard it).
	s := newStack(t, stackOptions{noLLM: true, replicas: 2, config: func(c *memory.Config) { c.PrefetchSettle = time.Millisecond }})
	coffee := s.create("alice", "favourite drink espresso coffee", nil, 0.5)
	n := 0
	for i := range 8 {
		text := fmt.Sprintf("favourite drink espresso number %d", i)
		id := fmt.Sprintf("am_replica_%d", i)
		before := s.embedded(text)
		s.client("ac_replicas", "alice", int32(n+i+1), &protocol.UserMessage{ID: id, ConversationID: "ac_replicas", Content: text})
		testkit.Eventually(t, 10*time.Second, func() bool { return s.embedded(text) > before }, "the prefetched search of %q", text)
		resp, got := s.searchedFor(id, rpc.MemorySearchRequest{UserID: "alice", Query: text})
		if got != "hit" {
			t.Fatalf("message %d: the turn's search was a %q, want a hit from the replica that began it", i, got)
		}
		if !slices.Equal(ids(resp.Memories), []string{coffee}) {
			t.Fatalf("message %d: %v, want %v", i, ids(resp.Memories), []string{coffee})
		}
		if n := s.embedded(text); n != before+1 {
			t.Fatalf("message %d: embedded %d times, want once", i, n-before)
		}
	}
	// No search was begun for this message: memory.search answers.
	if _, got := s.searchedFor("am_never_sent", rpc.MemorySearchRequest{UserID: "alice", Query: "never sent"}); got != "miss" {
		t.Fatalf("a message nobody searched: %q, want a miss answered by memory.search", got)
	}
}

// TestPrefetchUnappliedWrite: a write heard before a message and not known
// applied (another replica's) keeps the user's prefetched searches unused
// for the settle time, then they serve again.
func TestPrefetchUnappliedWrite(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true, config: func(c *memory.Config) { c.PrefetchSettle = 300 * time.Millisecond }})
	id := "amem_settle"
	s.sysAction("alice", &protocol.MemoryAction{ID: "amact_settle", Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: "favourite drink espresso", Embedding: embedding("favourite drink espresso")}})
	s.say("ac_settle", "alice", 1, "favourite drink espresso 0")
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: "favourite drink espresso 0"}, "stale")
	n := 0
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		n++
		text := fmt.Sprintf("favourite drink espresso %d", n)
		s.say("ac_settle", "alice", int32(n+1), text)
		resp, got := s.searched(rpc.MemorySearchRequest{UserID: "alice", Query: text})
		if !slices.Contains(ids(resp.Memories), id) {
			t.Fatalf("%v lacks %s", ids(resp.Memories), id)
		}
		if got != "hit" {
			return fmt.Errorf("prefetch %s", got)
		}
		return nil
	}, "a prefetched search used again after the settle time")
}

// TestPrefetchInFlight: a request that comes while its search is still
// running waits for it instead of searching again.
func TestPrefetchInFlight(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true, fake: []fakeopenai.Option{fakeopenai.WithProfile(fakeopenai.Profile{
		Embeddings: fakeopenai.EmbeddingsTiming{Fixed: 300 * time.Millisecond}})}})
	s.create("alice", "favourite drink espresso coffee", nil, 0.5)
	text := "favourite drink espresso"
	start := time.Now()
	s.say("ac_inflight", "alice", 1, text) // returns once the embeddings request is in flight
	resp := s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: text}, "hit")
	if len(resp.Memories) != 1 {
		t.Fatalf("memories %v", ids(resp.Memories))
	}
	if n := s.embedded(text); n != 1 {
		t.Fatalf("%d embeddings of the query, want 1", n)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("answered after %s, before the search it waited for could end", d)
	}
}

// TestPrefetchCap: the kept searches are capped; the oldest go first, and
// their requests search afresh.
func TestPrefetchCap(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true, config: func(c *memory.Config) { c.PrefetchEntries = 2 }})
	for i := range 4 {
		s.say("ac_cap", "alice", int32(i+1), fmt.Sprintf("message %d", i))
	}
	for i, want := range []string{"miss", "miss", "hit", "hit"} {
		s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: fmt.Sprintf("message %d", i)}, want)
	}
}

// TestPrefetchOff: ALICIA_MEMORY_PREFETCH=false searches nothing ahead.
func TestPrefetchOff(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true, config: func(c *memory.Config) { c.Prefetch = false }})
	s.client("ac_off", "alice", 1, &protocol.UserMessage{ID: "am_off", ConversationID: "ac_off", Content: "hello there"})
	// The message is stored, and the search after it is the only embedding.
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		if n := s.count(`SELECT count(*) FROM alicia_messages WHERE id = 'am_off'`); n != 1 {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	}, "the message stored")
	s.expect(rpc.MemorySearchRequest{UserID: "alice", Query: "hello there"}, "")
	if n := s.embedded("hello there"); n != 1 {
		t.Fatalf("%d embeddings, want the search's only", n)
	}
}

// withoutQuery is resp without what says how it was found (the caller's
// wait, prefetched or not), to compare two answers.
func withoutQuery(resp rpc.MemorySearchResponse) rpc.MemorySearchResponse {
	resp.Prefetched = false
	resp.Memories = slices.Clone(resp.Memories)
	for i := range resp.Memories {
		resp.Memories[i].Query = nil
	}
	return resp
}

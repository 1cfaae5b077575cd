package gateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

type memoryJSON struct {
	ID         string   `json:"id"`
	Content    string   `json:"content"`
	Tags       []string `json:"tags"`
	Importance float64  `json:"importance"`
	Pinned     bool     `json:"pinned"`
	Archived   bool     `json:"archived"`
	CreatedAt  int64    `json:"createdAt"`
	UpdatedAt  int64    `json:"updatedAt"`
	Similarity *float64 `json:"similarity"`
}

type memoryPage struct {
	Memories   []memoryJSON `json:"memories"`
	NextCursor string       `json:"nextCursor"`
}

func withMemory(embeddings string) func(*stackOptions) {
	return func(o *stackOptions) { o.memory, o.embeddings = true, embeddings }
}

func (p memoryPage) ids() string {
	var ids []string
	for _, m := range p.Memories {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

func TestMemories(t *testing.T) {
	emb := fakeopenai.New(t)
	s := newStack(t, withMemory(emb.URL()))

	var tea, porto memoryJSON
	s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": "Alice likes green tea", "tags": []string{"drinks"}, "importance": 0.8}).
		want(http.StatusCreated, &tea)
	if !strings.HasPrefix(tea.ID, "amem_") || tea.Content != "Alice likes green tea" || len(tea.Tags) != 1 || tea.Importance != 0.8 || tea.Pinned || tea.Archived || tea.CreatedAt == 0 {
		t.Fatalf("created %+v", tea)
	}
	s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": "Alice lives in Porto", "pinned": true}).want(http.StatusCreated, &porto)
	if !porto.Pinned || porto.Tags == nil || porto.Importance != 0.5 {
		t.Fatalf("created %+v", porto)
	}

	// An answer that used a memory shows it; the memory can be voted on.
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	s.publish(t, "alice",
		protocol.New(c.ID, &protocol.UserMessage{ID: "am_m1", ConversationID: c.ID, Content: "what do I drink?"}),
		protocol.New(c.ID, &protocol.StartAnswer{ID: "am_m1a", PreviousID: "am_m1", ConversationID: c.ID}),
		protocol.New(c.ID, &protocol.MemoryTrace{ID: "amu_1", MessageID: "am_m1a", ConversationID: c.ID, MemoryID: tea.ID, Content: tea.Content, Relevance: 0.75}),
		protocol.New(c.ID, &protocol.AssistantSentence{PreviousID: "am_m1a", ConversationID: c.ID, Sequence: 1, Text: "Green tea.", IsFinal: protocol.Ptr(true)}),
	)
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &c)
	if len(c.Messages) != 2 || len(c.Messages[1].MemoriesUsed) != 1 || c.Messages[1].MemoriesUsed[0].MemoryID != tea.ID ||
		c.Messages[1].MemoriesUsed[0].Content != "Alice likes green tea" || c.Messages[1].MemoriesUsed[0].Similarity != 0.75 {
		t.Fatalf("messages %s", mustJSON(c.Messages))
	}
	var v votesJSON
	s.call(t, aliceKey, "POST", "/v1/messages/am_m1a/votes", map[string]any{"vote": "up", "targetType": "memory", "targetId": tea.ID}).want(http.StatusOK, &v)
	if v.Upvotes != 1 || v.TargetID != tea.ID {
		t.Fatalf("memory vote %+v", v)
	}
	s.call(t, aliceKey, "POST", "/v1/messages/am_m1a/votes", map[string]any{"vote": "up", "targetType": "memory_usage", "targetId": "amu_1"}).want(http.StatusOK, &v)

	// Read your writes; pinned first.
	var page memoryPage
	s.call(t, aliceKey, "GET", "/v1/memories", nil).want(http.StatusOK, &page)
	if page.ids() != porto.ID+","+tea.ID {
		t.Fatalf("list %s", page.ids())
	}

	// Update keeps what it is not given.
	var got memoryJSON
	s.call(t, aliceKey, "PATCH", "/v1/memories/"+tea.ID, map[string]any{"content": "Alice likes jasmine tea", "importance": 0.9}).want(http.StatusOK, &got)
	if got.Content != "Alice likes jasmine tea" || got.Importance != 0.9 || len(got.Tags) != 1 || got.Tags[0] != "drinks" {
		t.Fatalf("updated %+v", got)
	}
	s.call(t, aliceKey, "PATCH", "/v1/memories/"+tea.ID, map[string]any{"tags": []string{"drinks", "mornings"}}).want(http.StatusOK, &got)
	if got.Content != "Alice likes jasmine tea" || len(got.Tags) != 2 {
		t.Fatalf("retagged %+v", got)
	}

	// Semantic search: the same text is the closest.
	s.call(t, aliceKey, "GET", "/v1/memories?q="+url.QueryEscape("Alice likes jasmine tea"), nil).want(http.StatusOK, &page)
	found := false
	for _, m := range page.Memories {
		if m.ID == tea.ID && m.Similarity != nil && *m.Similarity > 0.99 {
			found = true
		}
	}
	if !found {
		t.Fatalf("search %+v", page)
	}
	var bobs memoryPage
	s.call(t, bobKey, "GET", "/v1/memories?q="+url.QueryEscape("Alice likes jasmine tea"), nil).want(http.StatusOK, &bobs)
	if len(bobs.Memories) != 0 {
		t.Fatalf("bob finds %+v", bobs)
	}

	s.call(t, aliceKey, "POST", "/v1/memories/"+tea.ID+"/pin", nil).want(http.StatusOK, &got)
	if !got.Pinned {
		t.Fatalf("pinned %+v", got)
	}
	s.call(t, aliceKey, "POST", "/v1/memories/"+porto.ID+"/archive", nil).want(http.StatusOK, &got)
	if !got.Archived {
		t.Fatalf("archived %+v", got)
	}
	s.call(t, aliceKey, "GET", "/v1/memories", nil).want(http.StatusOK, &page)
	if page.ids() != tea.ID {
		t.Fatalf("list without archived %s", page.ids())
	}
	s.call(t, aliceKey, "GET", "/v1/memories?archived=true", nil).want(http.StatusOK, &page)
	if len(page.Memories) != 2 {
		t.Fatalf("list with archived %s", page.ids())
	}

	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"update", "PATCH", "/v1/memories/" + tea.ID, map[string]any{"content": "bob was here"}},
		{"delete", "DELETE", "/v1/memories/" + tea.ID, nil},
		{"pin", "POST", "/v1/memories/" + porto.ID + "/pin", nil},
		{"archive", "POST", "/v1/memories/" + tea.ID + "/archive", nil},
	} {
		t.Run("other user's "+c.name, func(t *testing.T) { s.call(t, bobKey, c.method, c.path, c.body).wantError(http.StatusForbidden) })
		t.Run("unknown "+c.name, func(t *testing.T) {
			s.call(t, aliceKey, c.method, strings.Replace(c.path, "amem_", "amem_x", 1), c.body).wantError(http.StatusNotFound)
		})
	}
	s.call(t, bobKey, "GET", "/v1/memories?archived=true", nil).want(http.StatusOK, &bobs)
	if len(bobs.Memories) != 0 {
		t.Fatalf("bob lists %+v", bobs)
	}

	s.call(t, aliceKey, "DELETE", "/v1/memories/"+tea.ID, nil).want(http.StatusNoContent, nil)
	s.call(t, aliceKey, "GET", "/v1/memories?archived=true", nil).want(http.StatusOK, &page)
	if page.ids() != porto.ID {
		t.Fatalf("after delete %s", page.ids())
	}
	s.call(t, aliceKey, "POST", "/v1/memories/"+tea.ID+"/pin", nil).wantError(http.StatusNotFound)

	long := strings.Repeat("m", 4001)
	many := make([]string, 21)
	for i := range many {
		many[i] = "t"
	}
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"no content", "POST", "/v1/memories", map[string]any{"tags": []string{"x"}}},
		{"blank content", "POST", "/v1/memories", map[string]any{"content": "   "}},
		{"content too long", "POST", "/v1/memories", map[string]any{"content": long}},
		{"too many tags", "POST", "/v1/memories", map[string]any{"content": "x", "tags": many}},
		{"empty tag", "POST", "/v1/memories", map[string]any{"content": "x", "tags": []string{""}}},
		{"importance above 1", "POST", "/v1/memories", map[string]any{"content": "x", "importance": 1.5}},
		{"unknown field", "POST", "/v1/memories", map[string]any{"content": "x", "embedding": []float64{1}}},
		{"empty patch", "PATCH", "/v1/memories/" + porto.ID, map[string]any{}},
		{"pin by patch", "PATCH", "/v1/memories/" + porto.ID, map[string]any{"pinned": false}},
		{"query too long", "GET", "/v1/memories?q=" + strings.Repeat("q", 1001), nil},
		{"search limit", "GET", "/v1/memories?q=tea&limit=51", nil},
		{"archived not a bool", "GET", "/v1/memories?archived=maybe", nil},
		{"bad cursor", "GET", "/v1/memories?cursor=xyz", nil},
	} {
		t.Run(c.name, func(t *testing.T) { s.call(t, aliceKey, c.method, c.path, c.body).wantError(http.StatusBadRequest) })
	}
}

func TestMemoryPaging(t *testing.T) {
	s := newStack(t, withMemory(""))
	made := map[string]bool{}
	for _, c := range []string{"one", "two", "three", "four", "five"} {
		var m memoryJSON
		s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": c, "pinned": c == "four"}).want(http.StatusCreated, &m)
		made[m.ID] = true
	}
	var all []memoryJSON
	cursor := ""
	for range 10 {
		var page memoryPage
		s.call(t, aliceKey, "GET", "/v1/memories?limit=2&cursor="+cursor, nil).want(http.StatusOK, &page)
		all = append(all, page.Memories...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 5 || all[0].Content != "four" {
		t.Fatalf("paged %+v", all)
	}
	for i, m := range all {
		if !made[m.ID] {
			t.Fatalf("%s repeated or unknown", m.ID)
		}
		delete(made, m.ID)
		if i > 1 && m.UpdatedAt > all[i-1].UpdatedAt {
			t.Fatalf("not newest first: %+v", all)
		}
	}
}

func TestMemoryServiceDown(t *testing.T) {
	t.Run("not running", func(t *testing.T) {
		s := newStack(t)
		s.call(t, aliceKey, "GET", "/v1/memories?q=tea", nil).wantError(http.StatusServiceUnavailable)
		s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": "x"}).wantError(http.StatusServiceUnavailable)
		var page memoryPage
		s.call(t, aliceKey, "GET", "/v1/memories", nil).want(http.StatusOK, &page) // the list is read from Postgres
	})
	t.Run("search off", func(t *testing.T) {
		s := newStack(t, withMemory(""))
		msg := s.call(t, aliceKey, "GET", "/v1/memories?q=tea", nil).wantError(http.StatusServiceUnavailable)
		if !strings.Contains(msg, "embeddings") {
			t.Fatalf("message %q does not say why", msg)
		}
	})
}

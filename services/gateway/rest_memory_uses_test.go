package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

type memoryUseJSON struct {
	MessageID         string  `json:"messageId"`
	ConversationID    string  `json:"conversationId"`
	ConversationTitle string  `json:"conversationTitle"`
	Excerpt           string  `json:"excerpt"`
	Similarity        float64 `json:"similarity"`
	CreatedAt         int64   `json:"createdAt"`
}

type memoryUsesPage struct {
	Uses       []memoryUseJSON `json:"uses"`
	NextCursor string          `json:"nextCursor"`
}

// answerUsing stores a user message and an answer of text that used memory
// mid (the trace use), and returns the answer's id.
func (s *stack) answerUsing(t *testing.T, user, cid, id, use, mid, text string, similarity float64) string {
	t.Helper()
	ans := id + "_ans"
	s.publish(t, user,
		protocol.New(cid, &protocol.UserMessage{ID: id, ConversationID: cid, Content: "question"}),
		protocol.New(cid, &protocol.StartAnswer{ID: ans, PreviousID: id, ConversationID: cid}),
		protocol.New(cid, &protocol.MemoryTrace{ID: use, MessageID: ans, ConversationID: cid, MemoryID: mid, Content: "trace", Relevance: similarity}),
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: ans, ConversationID: cid, Sequence: 1, Text: text, IsFinal: protocol.Ptr(true)}),
	)
	return ans
}

// TestMemoryUses: the answers that used a memory, newest first and paged,
// in the owner's conversations only (archived ones included, deleted ones
// never); another user's memory is a 403, an unknown one a 404.
func TestMemoryUses(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO alicia_memory (id, user_id, content) VALUES
		('amem_tea', 'alice', 'alice likes tea'), ('amem_unused', 'alice', 'never used'), ('amem_bob', 'bob', 'bob likes coffee')`); err != nil {
		t.Fatal(err)
	}
	var kitchen, trips, gone, bobs conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "Kitchen"}).want(http.StatusCreated, &kitchen)
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "Trips"}).want(http.StatusCreated, &trips)
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "Gone"}).want(http.StatusCreated, &gone)
	s.call(t, bobKey, "POST", "/v1/conversations", map[string]any{"title": "Bob's"}).want(http.StatusCreated, &bobs)

	long := strings.Repeat("é", 150) + strings.Repeat("x", 100) // 250 characters, 400 bytes
	a1 := s.answerUsing(t, "alice", kitchen.ID, "am_u1", "amu_1", "amem_tea", "Green tea, as you like.", 0.9)
	a2 := s.answerUsing(t, "alice", trips.ID, "am_u2", "amu_2", "amem_tea", long, 0.7)
	s.answerUsing(t, "alice", gone.ID, "am_u3", "amu_3", "amem_tea", "From a deleted conversation.", 0.8)
	a4 := s.answerUsing(t, "alice", kitchen.ID, "am_u4", "amu_4", "amem_tea", "Tea again.", 0.6)
	// A row naming alice's memory in bob's conversation (written before
	// persistence checked ownership): not hers to see.
	bobAns := s.turn(t, "bob", bobs.ID, "am_b1", "", "hi")
	if _, err := s.pool.Exec(ctx, `INSERT INTO alicia_memory_used (id, conversation_id, message_id, memory_id, similarity_score)
		VALUES ('amu_9', $1, $2, 'amem_tea', 0.5)`, bobs.ID, bobAns); err != nil {
		t.Fatal(err)
	}
	s.call(t, aliceKey, "PATCH", "/v1/conversations/"+trips.ID, map[string]any{"status": "archived"}).want(http.StatusOK, nil)
	s.call(t, aliceKey, "DELETE", "/v1/conversations/"+gone.ID, nil).want(http.StatusNoContent, nil)

	var page memoryUsesPage
	s.call(t, aliceKey, "GET", "/v1/memories/amem_tea/uses", nil).want(http.StatusOK, &page)
	var got []string
	for _, u := range page.Uses {
		got = append(got, u.MessageID)
	}
	if strings.Join(got, ",") != strings.Join([]string{a4, a2, a1}, ",") || page.NextCursor != "" {
		t.Fatalf("uses %v (next %q), want %v", got, page.NextCursor, []string{a4, a2, a1})
	}
	first, second := page.Uses[0], page.Uses[1]
	if first.ConversationID != kitchen.ID || first.ConversationTitle != "Kitchen" || first.Excerpt != "Tea again." || first.Similarity != 0.6 || first.CreatedAt == 0 {
		t.Fatalf("use %+v", first)
	}
	if second.ConversationTitle != "Trips" || second.Excerpt != long[:len(strings.Repeat("é", 150))+50] || second.Similarity != 0.7 {
		t.Fatalf("use %+v: the excerpt must be the answer's first 200 characters", second)
	}
	if first.CreatedAt < second.CreatedAt {
		t.Fatalf("not newest first: %d then %d", first.CreatedAt, second.CreatedAt)
	}

	// Paged like the other lists.
	var p1, p2, p3 memoryUsesPage
	s.call(t, aliceKey, "GET", "/v1/memories/amem_tea/uses?limit=2", nil).want(http.StatusOK, &p1)
	if len(p1.Uses) != 2 || p1.NextCursor == "" {
		t.Fatalf("page 1 %+v", p1)
	}
	s.call(t, aliceKey, "GET", "/v1/memories/amem_tea/uses?limit=2&cursor="+p1.NextCursor, nil).want(http.StatusOK, &p2)
	if len(p2.Uses) != 1 || p2.Uses[0].MessageID != a1 || p2.NextCursor != "" {
		t.Fatalf("page 2 %+v", p2)
	}
	s.call(t, aliceKey, "GET", "/v1/memories/amem_unused/uses", nil).want(http.StatusOK, &p3)
	if p3.Uses == nil || len(p3.Uses) != 0 {
		t.Fatalf("an unused memory: %s", mustJSON(p3))
	}

	for _, c := range []struct {
		name, key, path string
		status          int
	}{
		{"another user's memory", bobKey, "/v1/memories/amem_tea/uses", http.StatusForbidden},
		{"unknown memory", aliceKey, "/v1/memories/amem_nothing/uses", http.StatusNotFound},
		{"bad id", aliceKey, "/v1/memories/a.b/uses", http.StatusBadRequest},
		{"bad cursor", aliceKey, "/v1/memories/amem_tea/uses?cursor=nope", http.StatusBadRequest},
		{"bad limit", aliceKey, "/v1/memories/amem_tea/uses?limit=0", http.StatusBadRequest},
		{"no key", "", "/v1/memories/amem_tea/uses", http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) { s.call(t, c.key, "GET", c.path, nil).wantError(c.status) })
	}
}

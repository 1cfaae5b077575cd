package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

type ratedMemory struct {
	ID         string         `json:"id"`
	UserRating *int           `json:"userRating"`
	CreatedBy  string         `json:"createdBy"`
	SourceInfo map[string]any `json:"sourceInfo"`
}

// TestMemoryRatingREST: PUT /v1/memories/{id}/rating sets the owner's
// rating (1..5), which the memory's reads then show with its author; a
// rating outside 1..5 is 400 and another person's memory 403.
func TestMemoryRatingREST(t *testing.T) {
	emb := fakeopenai.New(t)
	s := newStack(t, withMemory(emb.URL()))
	var m ratedMemory
	s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": "Alice sings in a choir"}).want(http.StatusCreated, &m)
	if m.UserRating != nil || m.CreatedBy != "alice" {
		t.Fatalf("created %+v, want unrated, created by alice", m)
	}
	var rated ratedMemory
	s.call(t, aliceKey, "PUT", "/v1/memories/"+m.ID+"/rating", map[string]any{"rating": 5}).want(http.StatusOK, &rated)
	if rated.UserRating == nil || *rated.UserRating != 5 || rated.CreatedBy != "alice" {
		t.Fatalf("rated %+v", rated)
	}
	var page struct {
		Memories []ratedMemory `json:"memories"`
	}
	s.call(t, aliceKey, "GET", "/v1/memories", nil).want(http.StatusOK, &page)
	if len(page.Memories) != 1 || page.Memories[0].UserRating == nil || *page.Memories[0].UserRating != 5 {
		t.Fatalf("list %s", mustJSON(page))
	}
	for _, r := range []any{0, 6, 2.5, "five"} {
		s.call(t, aliceKey, "PUT", "/v1/memories/"+m.ID+"/rating", map[string]any{"rating": r}).wantError(http.StatusBadRequest)
	}
	s.call(t, bobKey, "PUT", "/v1/memories/"+m.ID+"/rating", map[string]any{"rating": 1}).wantError(http.StatusForbidden)
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT user_rating FROM alicia_memory WHERE id = $1`, m.ID).Scan(&n); err != nil || n != 5 {
		t.Fatalf("user_rating %d (%v), want 5 after the refused ratings", n, err)
	}
}

// TestCommentaryAndQueryREST: a Commentary sent over the WebSocket is
// checked by the edge, stored with its author and returned by GET
// /v1/conversations/{id}, on a message and on the whole conversation; the
// answer's memoriesUsed say which query found each memory.
func TestCommentaryAndQueryREST(t *testing.T) {
	emb := fakeopenai.New(t)
	s := newStack(t, withMemory(emb.URL()))
	var tea ratedMemory
	s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": "Alice likes green tea"}).want(http.StatusCreated, &tea)

	alice := s.dial(t, aliceKey)
	alice.send("", &protocol.Configuration{ClientVersion: protocol.Ptr("test/1")})
	cid := *alice.recv().Body.(*protocol.Configuration).ConversationID
	s.publish(t, "alice",
		protocol.New(cid, &protocol.UserMessage{ID: "am_c1", ConversationID: cid, Content: "what do I drink?"}),
		protocol.New(cid, &protocol.StartAnswer{ID: "am_c1a", PreviousID: "am_c1", ConversationID: cid}),
		protocol.New(cid, &protocol.MemoryTrace{ID: "amu_c1", MessageID: "am_c1a", ConversationID: cid, MemoryID: tea.ID, Content: "Alice likes green tea",
			Relevance: 0.8, QueryPrompt: protocol.Ptr("what do I drink?"),
			QueryPromptMeta: protocol.MemoryTraceQueryPromptMeta{"embeddingModel": "bge-m3", "candidates": 1, "limit": 5, "threshold": 0.35, "prefetched": true, "searchMs": 3.2}}),
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_c1a", ConversationID: cid, Sequence: 1, Text: "Green tea.", IsFinal: protocol.Ptr(true)}),
	)

	// The edge refuses an empty comment.
	alice.send(cid, &protocol.Commentary{ID: "aucc_empty", ConversationID: cid, MessageID: "am_c1a", Content: "  "})
	for {
		// The answer's envelopes come first.
		env := alice.recv()
		if e, ok := env.Body.(*protocol.ErrorMessage); ok {
			if e.Code != protocol.CodeInvalidBody {
				t.Fatalf("want ErrorMessage 103 for an empty commentary, got %+v", e)
			}
			break
		}
	}
	alice.send(cid, &protocol.Commentary{ID: "aucc_msg", ConversationID: cid, MessageID: "am_c1a", Content: "Spot on"})
	alice.send(cid, &protocol.Commentary{ID: "aucc_conv", ConversationID: cid, MessageID: "am_c1", Content: "A useful talk", CommentaryType: protocol.Ptr("conversation")})
	testkit.Eventually(t, 10*time.Second, func() bool {
		var n int
		_ = s.pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_user_conversation_commentaries WHERE conversation_id = $1 AND created_by = 'alice'`, cid).Scan(&n)
		return n == 2
	}, "the commentaries stored with their author")

	var c struct {
		Messages []struct {
			ID           string `json:"id"`
			MemoriesUsed []struct {
				MemoryID        string         `json:"memoryId"`
				QueryPrompt     string         `json:"queryPrompt"`
				QueryPromptMeta map[string]any `json:"queryPromptMeta"`
			} `json:"memoriesUsed"`
		} `json:"messages"`
		Commentaries []struct {
			ID             string `json:"id"`
			MessageID      string `json:"messageId"`
			Content        string `json:"content"`
			CommentaryType string `json:"commentaryType"`
			CreatedBy      string `json:"createdBy"`
			CreatedAt      int64  `json:"createdAt"`
		} `json:"commentaries"`
	}
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid, nil).want(http.StatusOK, &c)
	if len(c.Messages) != 2 || len(c.Messages[1].MemoriesUsed) != 1 {
		t.Fatalf("messages %s", mustJSON(c.Messages))
	}
	if u := c.Messages[1].MemoriesUsed[0]; u.QueryPrompt != "what do I drink?" || u.QueryPromptMeta["embeddingModel"] != "bge-m3" || u.QueryPromptMeta["prefetched"] != true {
		t.Fatalf("memory used %+v", u)
	}
	if len(c.Commentaries) != 2 {
		t.Fatalf("commentaries %s", mustJSON(c.Commentaries))
	}
	got := map[string]int{}
	for i, cm := range c.Commentaries {
		got[cm.ID] = i
		if cm.CreatedBy != "alice" || cm.CreatedAt == 0 {
			t.Fatalf("commentary %+v", cm)
		}
	}
	if m := c.Commentaries[got["aucc_msg"]]; m.MessageID != "am_c1a" || m.Content != "Spot on" {
		t.Fatalf("message commentary %+v", m)
	}
	if m := c.Commentaries[got["aucc_conv"]]; m.MessageID != "" || m.CommentaryType != "conversation" || m.Content != "A useful talk" {
		t.Fatalf("conversation commentary %+v", m)
	}
	// Bob sees none of it.
	s.call(t, bobKey, "GET", "/v1/conversations/"+cid, nil).wantError(http.StatusForbidden)
}

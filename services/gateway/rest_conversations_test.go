package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

type conversation struct {
	ID           string  `json:"id"`
	Title        string  `json:"title"`
	Status       string  `json:"status"`
	CreatedAt    int64   `json:"createdAt"`
	UpdatedAt    int64   `json:"updatedAt"`
	MessageCount int     `json:"messageCount"`
	TipMessageID *string `json:"tipMessageId"`
	LastClient   *int32  `json:"lastClientStanzaId"`
	Messages     []message
}

type message struct {
	ID             string  `json:"id"`
	PreviousID     *string `json:"previousId"`
	Role           string  `json:"role"`
	Content        string  `json:"content"`
	Status         string  `json:"status"`
	Interrupted    bool    `json:"interrupted"`
	SequenceNumber int     `json:"sequenceNumber"`
	CreatedAt      int64   `json:"createdAt"`
	SiblingCount   int     `json:"siblingCount"`
	ToolUses       []struct {
		ID         string         `json:"id"`
		ToolName   string         `json:"toolName"`
		Arguments  map[string]any `json:"arguments"`
		Result     any            `json:"result"`
		Status     string         `json:"status"`
		DurationMs *int           `json:"durationMs"`
	} `json:"toolUses"`
	MemoriesUsed []struct {
		MemoryID   string  `json:"memoryId"`
		Content    string  `json:"content"`
		Similarity float64 `json:"similarity"`
	} `json:"memoriesUsed"`
	Reasoning []struct {
		Sequence int    `json:"sequence"`
		Content  string `json:"content"`
	} `json:"reasoning"`
}

type conversationPage struct {
	Conversations []conversation `json:"conversations"`
	NextCursor    string         `json:"nextCursor"`
}

func TestConversationLifecycle(t *testing.T) {
	s := newStack(t)
	var c conversation
	r := s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "Trip to Lisbon"}).want(http.StatusCreated, &c)
	if !strings.HasPrefix(c.ID, "ac_") || c.Title != "Trip to Lisbon" || c.Status != "active" || c.MessageCount != 0 || c.CreatedAt == 0 ||
		c.LastClient == nil || *c.LastClient != 0 {
		t.Fatalf("created %+v", c)
	}
	if loc := r.header.Get("Location"); loc != "/v1/conversations/"+c.ID {
		t.Fatalf("Location = %q", loc)
	}
	var owner string
	if err := s.pool.QueryRow(t.Context(), `SELECT user_id FROM alicia_conversations WHERE id = $1`, c.ID).Scan(&owner); err != nil || owner != "alice" {
		t.Fatalf("owner = %q, %v", owner, err)
	}
	// Without a body: no title.
	var untitled conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &untitled)
	if untitled.Title != "" || untitled.ID == c.ID {
		t.Fatalf("untitled %+v", untitled)
	}

	// Read your writes: rename and archive show at once, in get and list.
	var got conversation
	s.call(t, aliceKey, "PATCH", "/v1/conversations/"+c.ID, map[string]any{"title": "Lisbon, May"}).want(http.StatusOK, &got)
	if got.Title != "Lisbon, May" || got.Status != "active" {
		t.Fatalf("renamed %+v", got)
	}
	s.call(t, aliceKey, "PATCH", "/v1/conversations/"+c.ID, map[string]any{"status": "archived"}).want(http.StatusOK, &got)
	if got.Title != "Lisbon, May" || got.Status != "archived" {
		t.Fatalf("archived %+v", got)
	}
	var page conversationPage
	s.call(t, aliceKey, "GET", "/v1/conversations", nil).want(http.StatusOK, &page)
	if len(page.Conversations) != 1 || page.Conversations[0].ID != untitled.ID || page.NextCursor != "" {
		t.Fatalf("active list %+v", page)
	}
	s.call(t, aliceKey, "GET", "/v1/conversations?status=archived", nil).want(http.StatusOK, &page)
	if len(page.Conversations) != 1 || page.Conversations[0].ID != c.ID {
		t.Fatalf("archived list %+v", page)
	}
	s.call(t, aliceKey, "GET", "/v1/conversations?status=all", nil).want(http.StatusOK, &page)
	if len(page.Conversations) != 2 {
		t.Fatalf("all list %+v", page)
	}
	// A connected WebSocket client is told about the change.
	ws := s.dial(t, aliceKey)
	ws.send("", &protocol.Configuration{ConversationID: &c.ID})
	if got := ws.recv(); got.Type != protocol.TypeConfiguration {
		t.Fatalf("got %+v", got)
	}
	s.call(t, aliceKey, "PATCH", "/v1/conversations/"+c.ID, map[string]any{"title": "Lisbon", "status": "active"}).want(http.StatusOK, &got)
	upd, ok := ws.recv().Body.(*protocol.ConversationUpdate)
	if !ok || upd.Title == nil || *upd.Title != "Lisbon" || upd.Status == nil || *upd.Status != "active" {
		t.Fatalf("WebSocket got %+v", upd)
	}
	// The client's stanza id is known for a later resume.
	if got.LastClient == nil || *got.LastClient != 1 {
		t.Fatalf("lastClientStanzaId = %v, want 1", got.LastClient)
	}

	// Bob sees none of it.
	s.call(t, bobKey, "GET", "/v1/conversations?status=all", nil).want(http.StatusOK, &page)
	if len(page.Conversations) != 0 {
		t.Fatalf("bob lists %+v", page)
	}

	// Soft delete: gone from reads, row kept with status deleted.
	s.call(t, aliceKey, "DELETE", "/v1/conversations/"+c.ID, nil).want(http.StatusNoContent, nil)
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "GET", "/v1/conversations?status=all", nil).want(http.StatusOK, &page)
	if len(page.Conversations) != 1 || page.Conversations[0].ID != untitled.ID {
		t.Fatalf("after delete %+v", page)
	}
	var status string
	if err := s.pool.QueryRow(t.Context(), `SELECT status::text FROM alicia_conversations WHERE id = $1`, c.ID).Scan(&status); err != nil || status != "deleted" {
		t.Fatalf("stored status %q, %v", status, err)
	}
	s.call(t, aliceKey, "DELETE", "/v1/conversations/"+c.ID, nil).wantError(http.StatusNotFound)
}

func TestConversationMessagesAndSiblings(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	a1 := s.turn(t, "alice", c.ID, "am_q1", "", "what is 2+2?")
	a2 := s.turn(t, "alice", c.ID, "am_q2", a1, "and again?")
	// A regenerated answer to q2: a sibling of a2, and the new branch head,
	// stopped while its tool call ran (the call is cancelled with it).
	s.publish(t, "alice",
		protocol.New(c.ID, &protocol.StartAnswer{ID: "am_q2_alt", PreviousID: "am_q2", ConversationID: c.ID}),
		protocol.New(c.ID, &protocol.ToolUseRequest{ID: "atu_pending", MessageID: "am_q2_alt", ConversationID: c.ID, ToolName: "web_search",
			Parameters: map[string]any{"query": "2+2"}, Execution: protocol.ToolUseRequestExecutionServer}),
		protocol.New(c.ID, &protocol.AssistantSentence{PreviousID: "am_q2_alt", ConversationID: c.ID, Sequence: 1, Text: "Still four"}),
		protocol.New(c.ID, &protocol.ControlStop{ConversationID: c.ID, TargetID: protocol.Ptr("am_q2_alt")}),
	)

	var got conversation
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &got)
	ids := []string{}
	for _, m := range got.Messages {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "am_q1,"+a1+",am_q2,am_q2_alt" {
		t.Fatalf("branch = %v", ids)
	}
	if got.MessageCount != 5 || got.TipMessageID == nil || *got.TipMessageID != "am_q2_alt" {
		t.Fatalf("conversation %+v", got.Conversation())
	}
	q1, ans1, alt := got.Messages[0], got.Messages[1], got.Messages[3]
	if q1.Role != "user" || q1.Content != "what is 2+2?" || q1.PreviousID != nil || q1.SiblingCount != 1 || q1.Status != "completed" {
		t.Fatalf("q1 %+v", q1)
	}
	if ans1.Role != "assistant" || ans1.Content != "Four." || *ans1.PreviousID != "am_q1" || ans1.Interrupted ||
		len(ans1.Reasoning) != 1 || ans1.Reasoning[0].Content != "think" ||
		len(ans1.ToolUses) != 1 || ans1.ToolUses[0].ToolName != "calculator" || ans1.ToolUses[0].Status != "success" ||
		ans1.ToolUses[0].Arguments["expression"] != "2+2" || ans1.ToolUses[0].Result != float64(4) {
		t.Fatalf("answer 1 %+v", ans1)
	}
	if !alt.Interrupted || alt.Content != "Still four" || alt.SiblingCount != 2 || alt.SequenceNumber != 4 ||
		len(alt.ToolUses) != 1 || alt.ToolUses[0].Status != "cancelled" || alt.ToolUses[0].Result != nil || len(alt.Reasoning) != 0 {
		t.Fatalf("interrupted alternative %+v", alt)
	}

	var sib struct {
		ParentID  *string   `json:"parentId"`
		Siblings  []message `json:"siblings"`
		CurrentID *string   `json:"currentId"`
	}
	s.call(t, aliceKey, "GET", "/v1/messages/"+a2+"/siblings", nil).want(http.StatusOK, &sib)
	if sib.ParentID == nil || *sib.ParentID != "am_q2" || len(sib.Siblings) != 2 || sib.Siblings[0].ID != a2 ||
		sib.Siblings[1].ID != "am_q2_alt" || sib.CurrentID == nil || *sib.CurrentID != "am_q2_alt" {
		t.Fatalf("siblings %s", mustJSON(sib))
	}
	if len(sib.Siblings[0].ToolUses) != 1 || sib.Siblings[0].SiblingCount != 2 {
		t.Fatalf("sibling details %+v", sib.Siblings[0])
	}
	// A root message: its siblings are the conversation's roots.
	s.call(t, aliceKey, "GET", "/v1/messages/am_q1/siblings", nil).want(http.StatusOK, &sib)
	if sib.ParentID != nil || len(sib.Siblings) != 1 || *sib.CurrentID != "am_q1" {
		t.Fatalf("root siblings %s", mustJSON(sib))
	}

	for _, c := range []struct {
		name, key, path string
		status          int
	}{
		{"other user's conversation", bobKey, "/v1/conversations/" + c.ID, http.StatusForbidden},
		{"other user's message", bobKey, "/v1/messages/am_q1/siblings", http.StatusForbidden},
		{"unknown conversation", aliceKey, "/v1/conversations/ac_nope", http.StatusNotFound},
		{"unknown message", aliceKey, "/v1/messages/am_nope/siblings", http.StatusNotFound},
		{"invalid id", aliceKey, "/v1/conversations/a.b", http.StatusBadRequest},
		{"no key", "", "/v1/conversations", http.StatusUnauthorized},
		{"unknown route", aliceKey, "/v1/nothing", http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) { s.call(t, c.key, "GET", c.path, nil).wantError(c.status) })
	}
}

func (c conversation) Conversation() conversation { c.Messages = nil; return c }

func TestConversationPaging(t *testing.T) {
	s := newStack(t)
	made := map[string]bool{}
	for range 5 {
		var c conversation
		s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
		made[c.ID] = true
	}
	seen := map[string]bool{}
	var prev *conversation
	cursor, pages := "", 0
	for {
		var page conversationPage
		s.call(t, aliceKey, "GET", "/v1/conversations?limit=2&cursor="+cursor, nil).want(http.StatusOK, &page)
		pages++
		for i := range page.Conversations {
			c := page.Conversations[i]
			if seen[c.ID] || !made[c.ID] {
				t.Fatalf("page %d: %s repeated or unknown", pages, c.ID)
			}
			if prev != nil && (c.UpdatedAt > prev.UpdatedAt || (c.UpdatedAt == prev.UpdatedAt && c.ID > prev.ID)) {
				t.Fatalf("not newest first: %+v after %+v", c, *prev)
			}
			seen[c.ID], prev = true, &c
		}
		if page.NextCursor == "" {
			if len(page.Conversations) != 1 {
				t.Fatalf("last page has %d", len(page.Conversations))
			}
			break
		}
		if len(page.Conversations) != 2 {
			t.Fatalf("page %d has %d", pages, len(page.Conversations))
		}
		cursor = page.NextCursor
	}
	if pages != 3 || len(seen) != 5 {
		t.Fatalf("%d pages, %d seen", pages, len(seen))
	}

	for _, c := range []struct{ name, query string }{
		{"limit 0", "limit=0"},
		{"limit too big", "limit=201"},
		{"limit not a number", "limit=ten"},
		{"bad cursor", "cursor=bm90LWEtY3Vyc29y"},
		{"cursor not base64", "cursor=!!"},
		{"bad status", "status=deleted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.call(t, aliceKey, "GET", "/v1/conversations?"+c.query, nil).wantError(http.StatusBadRequest)
		})
	}
}

func TestConversationWritesRejected(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "mine"}).want(http.StatusCreated, &c)
	long := strings.Repeat("x", 201)
	for _, tc := range []struct {
		name, key, method, path string
		body                    any
		status                  int
	}{
		{"title too long", aliceKey, "POST", "/v1/conversations", map[string]any{"title": long}, 400},
		{"not JSON", aliceKey, "POST", "/v1/conversations", "{", 400},
		{"unknown field", aliceKey, "POST", "/v1/conversations", map[string]any{"name": "x"}, 400},
		{"title not a string", aliceKey, "POST", "/v1/conversations", map[string]any{"title": 3}, 400},
		{"two values", aliceKey, "POST", "/v1/conversations", `{} {}`, 400},
		{"empty patch", aliceKey, "PATCH", "/v1/conversations/" + c.ID, map[string]any{}, 400},
		{"no patch body", aliceKey, "PATCH", "/v1/conversations/" + c.ID, nil, 400},
		{"status deleted by patch", aliceKey, "PATCH", "/v1/conversations/" + c.ID, map[string]any{"status": "deleted"}, 400},
		{"rename too long", aliceKey, "PATCH", "/v1/conversations/" + c.ID, map[string]any{"title": long}, 400},
		{"patch other user's", bobKey, "PATCH", "/v1/conversations/" + c.ID, map[string]any{"title": "bob's"}, 403},
		{"delete other user's", bobKey, "DELETE", "/v1/conversations/" + c.ID, nil, 403},
		{"patch unknown", aliceKey, "PATCH", "/v1/conversations/ac_unknown", map[string]any{"title": "x"}, 404},
		{"delete unknown", aliceKey, "DELETE", "/v1/conversations/ac_unknown", nil, 404},
		{"body too large", aliceKey, "POST", "/v1/conversations", `{"title":"` + strings.Repeat("x", 2<<20) + `"}`, 413},
	} {
		t.Run(tc.name, func(t *testing.T) { s.call(t, tc.key, tc.method, tc.path, tc.body).wantError(tc.status) })
	}
	var got conversation
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &got)
	if got.Title != "mine" || got.Status != "active" {
		t.Fatalf("a rejected write changed %+v", got)
	}
}

func TestWritesNeedPersistence(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.noPersistence = true })
	msg := s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "x"}).wantError(http.StatusServiceUnavailable)
	if !strings.Contains(msg, "persistence") {
		t.Fatalf("message %q does not name persistence", msg)
	}
	js, err := s.nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.StreamInfo("CONVERSATIONS")
	if err != nil || st.State.Msgs != 0 {
		t.Fatalf("published %d envelopes while persistence was away (%v)", st.State.Msgs, err)
	}

	// A persistence that answers but does not get to the write in time: 504.
	svc, err := micro.AddService(s.nc, micro.Config{Name: "slow-persistence", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("applied", micro.HandlerFunc(func(r micro.Request) {
		var req rpc.AppliedRequest
		if !rpc.Decode(r, &req) {
			return
		}
		if req.Sequence > 0 {
			rpc.Fail(r, rpc.CodeTimeout, "not applied in time")
			return
		}
		rpc.Respond(r, rpc.AppliedResponse{})
	}), micro.WithEndpointSubject(rpc.AppliedSubject))
	if err != nil {
		t.Fatal(err)
	}
	s.waitService(t, rpc.AppliedSubject)
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "x"}).wantError(http.StatusGatewayTimeout)
}

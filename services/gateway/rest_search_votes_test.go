package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestConversationSearch: ?q= keeps the conversations whose title contains
// it, ignoring case, with the status filter and the paging; %, _ and \ are
// plain characters.
func TestConversationSearch(t *testing.T) {
	s := newStack(t)
	ids := map[string]string{}
	for _, title := range []string{"Trip to Lisbon", "lisbon food", "LISBON archive", "100% sure", "snake_case notes", `back\slash`, "Tea"} {
		var c conversation
		s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": title}).want(http.StatusCreated, &c)
		ids[title] = c.ID
	}
	s.call(t, aliceKey, "PATCH", "/v1/conversations/"+ids["LISBON archive"], map[string]any{"status": "archived"}).want(http.StatusOK, nil)
	s.call(t, bobKey, "POST", "/v1/conversations", map[string]any{"title": "Lisbon (bob)"}).want(http.StatusCreated, nil)

	list := func(query string) []string {
		t.Helper()
		var page conversationPage
		s.call(t, aliceKey, "GET", "/v1/conversations?"+query, nil).want(http.StatusOK, &page)
		var titles []string
		for _, c := range page.Conversations {
			titles = append(titles, c.Title)
		}
		return titles
	}
	q := func(text string) string { return "q=" + url.QueryEscape(text) }
	for _, c := range []struct{ name, query, want string }{
		{"case-insensitive", q("lisbon"), "lisbon food|Trip to Lisbon"},
		{"with status all", q("LisBon") + "&status=all", "LISBON archive|lisbon food|Trip to Lisbon"},
		{"with status archived", q("lisbon") + "&status=archived", "LISBON archive"},
		{"substring", q("to lis"), "Trip to Lisbon"},
		{"percent is a character", q("%"), "100% sure"},
		{"underscore is a character", q("_"), "snake_case notes"},
		{"underscore between", q("e_c"), "snake_case notes"},
		{"backslash is a character", q(`\`), `back\slash`},
		{"backslash then letter", q(`k\s`), `back\slash`},
		{"no wildcard through %", q("0%s"), ""},
		{"quote", q("'; DROP TABLE alicia_conversations; --"), ""},
		{"empty is no filter", q("") + "&status=all", "LISBON archive|Tea|back\\slash|snake_case notes|100% sure|lisbon food|Trip to Lisbon"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(list(c.query), "|"); got != c.want {
				t.Fatalf("GET ?%s = %q, want %q", c.query, got, c.want)
			}
		})
	}

	// Paging through the matches.
	var seen []string
	cursor := ""
	for range 5 {
		var page conversationPage
		s.call(t, aliceKey, "GET", "/v1/conversations?status=all&limit=1&"+q("lisbon")+"&cursor="+cursor, nil).want(http.StatusOK, &page)
		for _, c := range page.Conversations {
			seen = append(seen, c.Title)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(seen, "|") != "LISBON archive|lisbon food|Trip to Lisbon" {
		t.Fatalf("paged %v", seen)
	}

	s.call(t, aliceKey, "GET", "/v1/conversations?"+q(strings.Repeat("é", 200)), nil).want(http.StatusOK, nil)
	s.call(t, aliceKey, "GET", "/v1/conversations?"+q(strings.Repeat("é", 201)), nil).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "GET", "/v1/conversations?q=%ff", nil).wantError(http.StatusBadRequest)
}

type countsJSON struct {
	Upvotes      int     `json:"upvotes"`
	Downvotes    int     `json:"downvotes"`
	SpecialVotes int     `json:"specialVotes"`
	UserVote     *string `json:"userVote"`
}

func (c countsJSON) String() string { return mustJSON(c) }

type votedMessage struct {
	ID        string     `json:"id"`
	Votes     countsJSON `json:"votes"`
	NoteCount int        `json:"noteCount"`
	ToolUses  []struct {
		ID    string     `json:"id"`
		Votes countsJSON `json:"votes"`
	} `json:"toolUses"`
	MemoriesUsed []struct {
		ID       string     `json:"id"`
		MemoryID string     `json:"memoryId"`
		Votes    countsJSON `json:"votes"`
	} `json:"memoriesUsed"`
	Reasoning []struct {
		ID    string     `json:"id"`
		Votes countsJSON `json:"votes"`
	} `json:"reasoning"`
}

func counts(up, down, special int, user string) countsJSON {
	c := countsJSON{Upvotes: up, Downvotes: down, SpecialVotes: special}
	if user != "" {
		c.UserVote = &user
	}
	return c
}

func sameCounts(a, b countsJSON) bool {
	return a.Upvotes == b.Upvotes && a.Downvotes == b.Downvotes && a.SpecialVotes == b.SpecialVotes &&
		(a.UserVote == nil) == (b.UserVote == nil) && (a.UserVote == nil || *a.UserVote == *b.UserVote)
}

// TestMessageVotesInConversation: each message of GET
// /v1/conversations/{id} (and of the siblings route) carries its votes and
// note count, each tool use, memory use and reasoning step its votes, with
// the caller's own vote; the ids are the ones POST /votes takes.
func TestMessageVotesInConversation(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO alicia_memory (id, user_id, content) VALUES ('amem_v', 'alice', 'alice likes tea')`); err != nil {
		t.Fatal(err)
	}
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	ans := s.turn(t, "alice", c.ID, "am_v1", "", "hello")
	s.publish(t, "alice", protocol.New(c.ID, &protocol.MemoryTrace{ID: "amu_v1", MessageID: ans, ConversationID: c.ID, MemoryID: "amem_v", Content: "tea", Relevance: 0.8}))
	second := s.turn(t, "alice", c.ID, "am_v2", ans, "again")

	vote := func(body map[string]any) {
		t.Helper()
		s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/votes", body).want(http.StatusOK, nil)
	}
	vote(map[string]any{"vote": "up"})
	vote(map[string]any{"vote": "critical", "targetType": "tool_use", "targetId": ans + "_t1"})
	vote(map[string]any{"vote": "down", "targetType": "reasoning", "targetId": ans + "_r1"})
	vote(map[string]any{"vote": "up", "targetType": "memory_usage", "targetId": "amu_v1"})
	// Someone else's votes count, without being the caller's.
	if _, err := s.pool.Exec(ctx, `INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote, user_id) VALUES
		($1, $2, 'message', $2, 'up', 'carol'), ($1, $2, 'reasoning', $3, 'critical', 'carol'),
		($1, $2, 'message', $2, 'down', 'dave'), ($1, $4, 'message', $4, 'up', 'dave')`, c.ID, ans, ans+"_r1", second); err != nil {
		t.Fatal(err)
	}
	var removed noteJSON
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/notes", map[string]any{"content": "keep"}).want(http.StatusCreated, nil)
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/notes", map[string]any{"content": "drop"}).want(http.StatusCreated, &removed)
	s.call(t, aliceKey, "DELETE", "/v1/notes/"+removed.ID, nil).want(http.StatusNoContent, nil)
	s.call(t, aliceKey, "POST", "/v1/messages/"+second+"/notes", map[string]any{"content": "second"}).want(http.StatusCreated, nil)

	var got struct {
		Messages []votedMessage `json:"messages"`
	}
	r := s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &got)
	if len(got.Messages) != 4 {
		t.Fatalf("messages %s", r.body)
	}
	// A message nobody voted on still has the object.
	if !strings.Contains(string(r.body), `"votes":{"upvotes":0,"downvotes":0,"specialVotes":0,"userVote":null},"noteCount":0`) {
		t.Fatalf("the user message's votes: %s", r.body)
	}
	user, a, user2, b := got.Messages[0], got.Messages[1], got.Messages[2], got.Messages[3]
	for _, m := range []votedMessage{user, user2} {
		if !sameCounts(m.Votes, counts(0, 0, 0, "")) || m.NoteCount != 0 {
			t.Errorf("message %s: votes %v, notes %d", m.ID, m.Votes, m.NoteCount)
		}
	}
	if a.ID != ans || !sameCounts(a.Votes, counts(2, 1, 0, "up")) || a.NoteCount != 1 {
		t.Errorf("answer: votes %v, notes %d", a.Votes, a.NoteCount)
	}
	if len(a.ToolUses) != 1 || a.ToolUses[0].ID != ans+"_t1" || !sameCounts(a.ToolUses[0].Votes, counts(0, 0, 1, "critical")) {
		t.Errorf("tool uses %s", mustJSON(a.ToolUses))
	}
	if len(a.Reasoning) != 1 || a.Reasoning[0].ID != ans+"_r1" || !sameCounts(a.Reasoning[0].Votes, counts(0, 1, 1, "down")) {
		t.Errorf("reasoning %s", mustJSON(a.Reasoning))
	}
	if len(a.MemoriesUsed) != 1 || a.MemoriesUsed[0].ID != "amu_v1" || a.MemoriesUsed[0].MemoryID != "amem_v" ||
		!sameCounts(a.MemoriesUsed[0].Votes, counts(1, 0, 0, "up")) {
		t.Errorf("memories used %s", mustJSON(a.MemoriesUsed))
	}
	if b.ID != second || !sameCounts(b.Votes, counts(1, 0, 0, "")) || b.NoteCount != 1 ||
		!sameCounts(b.ToolUses[0].Votes, counts(0, 0, 0, "")) || !sameCounts(b.Reasoning[0].Votes, counts(0, 0, 0, "")) {
		t.Errorf("second answer %s", mustJSON(b))
	}

	// A removed vote is gone; the siblings route carries the votes too.
	vote(map[string]any{"vote": "remove"})
	var sibs struct {
		Siblings []votedMessage `json:"siblings"`
	}
	s.call(t, aliceKey, "GET", "/v1/messages/"+ans+"/siblings", nil).want(http.StatusOK, &sibs)
	if len(sibs.Siblings) != 1 || !sameCounts(sibs.Siblings[0].Votes, counts(1, 1, 0, "")) || sibs.Siblings[0].NoteCount != 1 ||
		!sameCounts(sibs.Siblings[0].ToolUses[0].Votes, counts(0, 0, 1, "critical")) {
		t.Fatalf("siblings %s", mustJSON(sibs))
	}
}

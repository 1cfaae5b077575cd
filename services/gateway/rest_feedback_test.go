package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

type votesJSON struct {
	TargetType   string  `json:"targetType"`
	TargetID     string  `json:"targetId"`
	Upvotes      int     `json:"upvotes"`
	Downvotes    int     `json:"downvotes"`
	SpecialVotes int     `json:"specialVotes"`
	UserVote     *string `json:"userVote"`
}

type noteJSON struct {
	ID        string `json:"id"`
	Content   string `json:"content"`
	Category  string `json:"category"`
	CreatedAt int64  `json:"createdAt"`
}

func TestVotesAndNotes(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	ans := s.turn(t, "alice", c.ID, "am_v1", "", "hello")

	var v votesJSON
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/votes", map[string]any{"vote": "up", "quickFeedback": "helpful"}).want(http.StatusOK, &v)
	if v.TargetType != "message" || v.TargetID != ans || v.Upvotes != 1 || v.Downvotes != 0 || v.UserVote == nil || *v.UserVote != "up" {
		t.Fatalf("vote %+v", v)
	}
	// A changed vote replaces the user's vote.
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/votes", map[string]any{"vote": "down", "note": "wrong"}).want(http.StatusOK, &v)
	if v.Upvotes != 0 || v.Downvotes != 1 || *v.UserVote != "down" {
		t.Fatalf("changed vote %+v", v)
	}
	var stored struct {
		vote, user string
		note       *string
	}
	if err := s.pool.QueryRow(t.Context(), `SELECT vote::text, user_id, note FROM alicia_votes WHERE target_id = $1 AND deleted_at IS NULL`, ans).
		Scan(&stored.vote, &stored.user, &stored.note); err != nil || stored.vote != "down" || stored.user != "alice" || *stored.note != "wrong" {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	// The envelope went where a client's would, under alice.
	js, _ := s.nc.JetStream()
	msg, err := js.GetLastMsg("CONVERSATIONS", "alicia.conv."+c.ID+".client.feedback")
	if err != nil {
		t.Fatal(err)
	}
	env, err := protocol.Decode(msg.Data)
	if err != nil || env.Meta[edge.MetaUserID] != "alice" {
		t.Fatalf("feedback envelope %+v, %v", env, err)
	}
	// A tool use of the answer can be voted on; remove takes the vote back.
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/votes", map[string]any{"vote": "critical", "targetType": "tool_use", "targetId": ans + "_t1"}).want(http.StatusOK, &v)
	if v.TargetType != "tool_use" || v.SpecialVotes != 1 || *v.UserVote != "critical" {
		t.Fatalf("tool vote %+v", v)
	}
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/votes", map[string]any{"vote": "remove"}).want(http.StatusOK, &v)
	if v.Downvotes != 0 || v.UserVote != nil {
		t.Fatalf("removed vote %+v", v)
	}

	// Notes.
	var n noteJSON
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/notes", map[string]any{"content": "Say it shorter"}).want(http.StatusCreated, &n)
	if !strings.HasPrefix(n.ID, "an_") || n.Content != "Say it shorter" || n.Category != "general" || time.Since(time.UnixMilli(n.CreatedAt)) > time.Minute {
		t.Fatalf("note %+v", n)
	}
	var n2 noteJSON
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/notes", map[string]any{"content": "It is 4", "category": "correction"}).want(http.StatusCreated, &n2)
	var notes struct {
		Notes []noteJSON `json:"notes"`
	}
	s.call(t, aliceKey, "GET", "/v1/messages/"+ans+"/notes", nil).want(http.StatusOK, &notes)
	if len(notes.Notes) != 2 || notes.Notes[0].ID != n.ID || notes.Notes[1].Category != "correction" {
		t.Fatalf("notes %+v", notes)
	}
	s.call(t, bobKey, "DELETE", "/v1/notes/"+n.ID, nil).wantError(http.StatusForbidden)
	s.call(t, aliceKey, "DELETE", "/v1/notes/"+n.ID, nil).want(http.StatusNoContent, nil)
	s.call(t, aliceKey, "GET", "/v1/messages/"+ans+"/notes", nil).want(http.StatusOK, &notes)
	if len(notes.Notes) != 1 || notes.Notes[0].ID != n2.ID {
		t.Fatalf("after delete %+v", notes)
	}
	s.call(t, aliceKey, "DELETE", "/v1/notes/"+n.ID, nil).wantError(http.StatusNotFound)

	for _, tc := range []struct {
		name, key, method, path string
		body                    any
		status                  int
	}{
		{"vote on other user's message", bobKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "up"}, 403},
		{"notes of other user's message", bobKey, "GET", "/v1/messages/" + ans + "/notes", nil, 403},
		{"note on other user's message", bobKey, "POST", "/v1/messages/" + ans + "/notes", map[string]any{"content": "x"}, 403},
		{"vote on unknown message", aliceKey, "POST", "/v1/messages/am_nope/votes", map[string]any{"vote": "up"}, 404},
		{"notes of unknown message", aliceKey, "GET", "/v1/messages/am_nope/notes", nil, 404},
		{"unknown target", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "up", "targetType": "sentence", "targetId": "ams_nope"}, 404},
		{"another message as target", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "up", "targetId": "am_v1"}, 404},
		{"bad vote", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "meh"}, 400},
		{"no vote", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{}, 400},
		{"bad target type", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "up", "targetType": "audio"}, 400},
		{"target type without id", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "up", "targetType": "reasoning"}, 400},
		{"quick feedback too long", aliceKey, "POST", "/v1/messages/" + ans + "/votes", map[string]any{"vote": "up", "quickFeedback": strings.Repeat("q", 201)}, 400},
		{"empty note", aliceKey, "POST", "/v1/messages/" + ans + "/notes", map[string]any{"content": ""}, 400},
		{"note too long", aliceKey, "POST", "/v1/messages/" + ans + "/notes", map[string]any{"content": strings.Repeat("n", 4001)}, 400},
		{"bad category", aliceKey, "POST", "/v1/messages/" + ans + "/notes", map[string]any{"content": "x", "category": "rant"}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) { s.call(t, tc.key, tc.method, tc.path, tc.body).wantError(tc.status) })
	}
	// The vote on a reasoning step, a target of the message, is accepted.
	s.call(t, aliceKey, "POST", "/v1/messages/"+ans+"/votes", map[string]any{"vote": "up", "targetType": "reasoning", "targetId": ans + "_r1"}).want(http.StatusOK, &v)
	if v.Upvotes != 1 {
		t.Fatalf("reasoning vote %+v", v)
	}
}

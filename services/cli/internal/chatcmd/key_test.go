package chatcmd_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
)

// TestKeyOnlyInTheAuthorizationHeader holds a resumed chat through a
// reconnect: the REST call that resumes it and both WebSocket upgrades carry
// the key as "Authorization: Bearer", and no request URL — what a reverse
// proxy writes to its access log — holds it in any encoding.
func TestKeyOnlyInTheAuthorizationHeader(t *testing.T) {
	g := newFakeGateway(t)
	g.rest.Add(api.ConversationDetail{Conversation: api.Conversation{ID: "ac_chat", Status: "active"}})
	c := startChat(t, g, func(o *chatcmd.Options) { o.ConversationID = "ac_chat" })
	g.expect(protocol.TypeConfiguration)
	c.say("Is my key safe?")
	um := g.expect(protocol.TypeUserMessage)
	g.drop()
	g.expect(protocol.TypeConfiguration) // the second upgrade
	g.expect(protocol.TypeUserMessage)   // resent
	answer(g, "am_k", um.Body.(*protocol.UserMessage).ID, "In the header.")
	if err := c.end(); err != nil {
		t.Fatal(err)
	}

	g.mu.Lock()
	reqs := slices.Clone(g.requests)
	g.mu.Unlock()
	upgrades, rest := 0, 0
	for _, r := range reqs {
		if strings.HasPrefix(r.uri, "/v1/ws") {
			upgrades++
		} else {
			rest++
		}
		if r.auth != "Bearer "+key {
			t.Errorf("%s: Authorization %q, want Bearer and the key", r.uri, r.auth)
		}
		for _, form := range []string{key, url.QueryEscape(key), url.PathEscape(key), "token="} {
			if strings.Contains(r.uri, form) {
				t.Errorf("request URL %q holds the key (%q)", r.uri, form)
			}
		}
	}
	if upgrades != 2 || rest != 1 {
		t.Fatalf("%d WebSocket upgrades and %d REST calls, want 2 and 1: %+v", upgrades, rest, reqs)
	}
}

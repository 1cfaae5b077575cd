package chatcmd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

func TestReconnectLosesAndRepeatsNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		overlap int
	}{
		{"exact replay", 0},
		{"overlapping replay", 2}, // the start and the first sentence come again
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGateway(t)
			c := startChat(t, g, nil)
			g.expect(protocol.TypeConfiguration)
			c.say("Count to three")
			um := g.expect(protocol.TypeUserMessage)
			id := um.Body.(*protocol.UserMessage).ID
			g.publish(&protocol.StartAnswer{ID: "am_c", PreviousID: id, ConversationID: "ac_chat"})
			seen := g.publish(sentence("am_c", 1, "One."))
			c.waitOut("alicia> One.")

			g.mu.Lock()
			g.overlap = tc.overlap
			g.mu.Unlock()
			g.drop()
			g.publish(sentence("am_c", 2, "Two.")) // while the client is away
			cfg := g.expect(protocol.TypeConfiguration)
			body := cfg.Body.(*protocol.Configuration)
			if body.ConversationID == nil || *body.ConversationID != "ac_chat" || body.LastSequenceSeen == nil || *body.LastSequenceSeen != seen || cfg.StanzaID != 3 {
				t.Fatalf("reconnect Configuration = %+v %+v, want ac_chat after %d", cfg, body, seen)
			}
			// The message is resent with its stanza id (JetStream drops the copy).
			if again := g.expect(protocol.TypeUserMessage); again.StanzaID != um.StanzaID || again.Body.(*protocol.UserMessage).ID != id {
				t.Fatalf("resent %+v, want stanza %d id %s", again, um.StanzaID, id)
			}
			c.waitOut("Two.")
			g.publish(final("am_c", 3, "Three."))
			if err := c.end(); err != nil {
				t.Fatal(err)
			}
			if got, want := c.out.String(), "you> Count to three\nalicia> One. Two. Three.\n"; got != want {
				t.Fatalf("output:\n%q\nwant:\n%q", got, want)
			}
			if e := c.err.String(); !strings.Contains(e, "connection to the gateway lost") || !strings.Contains(e, "reconnected") {
				t.Fatalf("stderr = %q", e)
			}
		})
	}
}

func TestLostMessageIsResent(t *testing.T) {
	g := newFakeGateway(t)
	g.dropOn = protocol.TypeUserMessage
	c := startChat(t, g, nil)
	g.expect(protocol.TypeConfiguration)
	c.say("Are you there?")
	first := g.expect(protocol.TypeUserMessage)
	cfg := g.expect(protocol.TypeConfiguration)
	if cfg.Body.(*protocol.Configuration).LastSequenceSeen == nil {
		t.Fatal("reconnected without lastSequenceSeen")
	}
	again := g.expect(protocol.TypeUserMessage)
	if again.StanzaID != first.StanzaID || again.Body.(*protocol.UserMessage).ID != first.Body.(*protocol.UserMessage).ID {
		t.Fatalf("resent %+v, first %+v", again, first)
	}
	answer(g, "am_y", first.Body.(*protocol.UserMessage).ID, "Yes.")
	if err := c.end(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.out.String(), "alicia> Yes.\n") {
		t.Fatalf("output:\n%s", c.out.String())
	}
}

func TestErrors(t *testing.T) {
	t.Run("server error ends the turn", func(t *testing.T) {
		g := newFakeGateway(t)
		c := startChat(t, g, func(o *chatcmd.Options) { o.Style = style.Style{Color: true} })
		g.expect(protocol.TypeConfiguration)
		g.send(&protocol.ErrorMessage{ID: "aerr_0", ConversationID: "ac_chat", Code: protocol.CodeInvalidBody, Message: "content: required", Severity: 2, Recoverable: true})
		c.waitOut("[error 103] content: required")
		c.say("hi")
		g.expect(protocol.TypeUserMessage)
		g.publish(&protocol.ErrorMessage{ID: "aerr_1", ConversationID: "ac_chat", Code: protocol.CodeBackendUnavailable, Message: "model backend unavailable", Severity: 2, Recoverable: true})
		c.waitOut("\x1b[31m[error 503] model backend unavailable\x1b[0m\n")
		if err := c.end(); !errors.Is(err, chatcmd.ErrTurnsFailed) {
			t.Fatalf("piped chat with a failed answer ended with %v, want ErrTurnsFailed", err)
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		g := newFakeGateway(t)
		c := startChat(t, g, func(o *chatcmd.Options) { o.AnswerTimeout = 150 * time.Millisecond })
		g.expect(protocol.TypeConfiguration)
		c.say("hello?")
		g.expect(protocol.TypeUserMessage)
		c.waitOut("[error] no answer from the server within 150ms")
		if err := c.end(); !errors.Is(err, chatcmd.ErrTurnsFailed) {
			t.Fatalf("ended with %v", err)
		}
	})
	t.Run("gives up when the gateway is gone", func(t *testing.T) {
		g := newFakeGateway(t)
		c := startChat(t, g, func(o *chatcmd.Options) { o.Backoff.GiveUp = 100 * time.Millisecond })
		g.expect(protocol.TypeConfiguration)
		testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(c.err.String(), "New conversation") }, "configured")
		g.drop()
		g.srv.Close()
		select {
		case err := <-c.done:
			c.done <- err
			if !errors.Is(err, chatcmd.ErrGaveUp) {
				t.Fatalf("ended with %v, want ErrGaveUp", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("still reconnecting")
		}
	})
	for _, tc := range []struct {
		name, cid, key, want string
		is                   error
	}{
		{"wrong key", "", "wrong-key-but-long-enough", "GET /v1/ws: 401 Unauthorized: missing or invalid API key", nil},
		{"unknown conversation", "ac_missing", key, "GET /v1/conversations/ac_missing: 404 Not Found: conversation not found", nil},
		{"refused on the socket", "ac_refused", key, "error 203: conversation belongs to another user", chatcmd.ErrRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGateway(t)
			g.rest.Add(api.ConversationDetail{Conversation: api.Conversation{ID: "ac_refused", Status: "active"}})
			client, err := api.New(g.srv.URL, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			err = chatcmd.Run(context.Background(), chatcmd.Options{API: client, ConversationID: tc.cid, In: strings.NewReader("hi\n")})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.key) {
				t.Fatalf("error = %v, want %q (without the key)", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestResume(t *testing.T) {
	g := newFakeGateway(t)
	g.rest.Add(api.ConversationDetail{
		Conversation: api.Conversation{ID: "ac_chat", Title: "Old chat", Status: "active", LastClientStanzaID: 41},
		Messages: []api.Message{
			{ID: "am_u0", Role: "user", Content: "Remember me?", Status: "completed"},
			{ID: "am_a0", PreviousID: protocol.Ptr("am_u0"), Role: "assistant", Content: "Of course.", Status: "completed"},
		},
	})
	c := startChat(t, g, func(o *chatcmd.Options) { o.ConversationID, o.Interactive = "ac_chat", true })
	cfg := g.expect(protocol.TypeConfiguration)
	body := cfg.Body.(*protocol.Configuration)
	if cfg.StanzaID != 42 || body.ConversationID == nil || *body.ConversationID != "ac_chat" || body.LastSequenceSeen != nil {
		t.Fatalf("resume Configuration = %+v %+v", cfg, body)
	}
	c.waitOut("you> ")
	out := c.out.String()
	if !strings.Contains(out, "Old chat — 2 messages") || !strings.Contains(out, "you> Remember me?") || !strings.Contains(out, "alicia> Of course.") {
		t.Fatalf("history:\n%s", out)
	}
	c.say("/regenerate")
	v := g.expect(protocol.TypeControlVariation)
	if v.StanzaID != 43 || v.Body.(*protocol.ControlVariation).TargetID != "am_a0" {
		t.Fatalf("regenerate after resume = %+v %+v", v, v.Body)
	}
	answer(g, "am_a1", "am_u0", "Yes, I do.")
	c.waitOut("alicia> Yes, I do.\nyou> ")
	if strings.Contains(c.out.String(), "you> /regenerate") {
		t.Fatal("typed input echoed on a terminal")
	}
}

// TestRevokedCloseEndsTheChat: a connection the gateway closes for good
// (key revoked, conversation deleted) ends the chat with the gateway's
// reason, without dialling again.
func TestRevokedCloseEndsTheChat(t *testing.T) {
	for _, tc := range []struct {
		code   websocket.StatusCode
		reason string
	}{{4401, "signed out: the session ended; sign in again"}, {4404, "conversation deleted"}} {
		t.Run(tc.reason, func(t *testing.T) {
			g := newFakeGateway(t)
			c := startChat(t, g, nil)
			g.expect(protocol.TypeConfiguration)
			testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(c.err.String(), "New conversation") }, "configured")
			g.closeWith(tc.code, tc.reason)
			select {
			case err := <-c.done:
				c.done <- err
				if !errors.Is(err, chatcmd.ErrRevoked) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("ended with %v, want ErrRevoked with %q", err, tc.reason)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the chat did not end")
			}
			g.mu.Lock()
			dials := g.dials
			g.mu.Unlock()
			if dials != 1 {
				t.Fatalf("%d dials, want 1: the chat reconnected after a revocation", dials)
			}
		})
	}
}

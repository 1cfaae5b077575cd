package chatcmd_test

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

type chat struct {
	t        *testing.T
	in       *io.PipeWriter
	out, err *testkit.SyncBuffer
	ints     chan os.Signal
	done     chan error
}

// startChat runs `alicia chat` against g with piped input, as a script would.
func startChat(t *testing.T, g *fakeGateway, edit func(*chatcmd.Options)) *chat {
	t.Helper()
	pr, pw := io.Pipe()
	c := &chat{t: t, in: pw, out: &testkit.SyncBuffer{}, err: &testkit.SyncBuffer{}, ints: make(chan os.Signal, 1), done: make(chan error, 1)}
	client, err := api.New(g.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	o := chatcmd.Options{API: client, In: pr, Out: c.out, Err: c.err, Interrupts: c.ints,
		Backoff: chatcmd.Backoff{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond, GiveUp: 5 * time.Second}}
	if edit != nil {
		edit(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { c.done <- chatcmd.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("the chat did not end")
		}
	})
	return c
}

func (c *chat) say(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chat) waitOut(want string) {
	c.t.Helper()
	testkit.Eventually(c.t, 10*time.Second, func() bool { return strings.Contains(c.out.String(), want) }, "output %q; got:\n%s", want, c.out)
}

// end closes the input and returns how the chat ended.
func (c *chat) end() error {
	c.t.Helper()
	c.in.Close()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		c.t.Fatal("the chat did not end after its input")
	}
	return nil
}

func final(answer string, seq int32, text string) *protocol.AssistantSentence {
	return &protocol.AssistantSentence{PreviousID: answer, ConversationID: "ac_chat", Sequence: seq, Text: text, IsFinal: protocol.Ptr(true)}
}

func sentence(answer string, seq int32, text string) *protocol.AssistantSentence {
	return &protocol.AssistantSentence{PreviousID: answer, ConversationID: "ac_chat", Sequence: seq, Text: text}
}

// answer plays a complete streamed answer to the user message prev.
func answer(g *fakeGateway, id, prev string, sentences ...string) {
	g.publish(&protocol.StartAnswer{ID: id, PreviousID: prev, ConversationID: "ac_chat"})
	for i, s := range sentences {
		if i == len(sentences)-1 {
			g.publish(final(id, int32(i+1), s))
		} else {
			g.publish(sentence(id, int32(i+1), s))
		}
	}
}

// marker publishes a title change and waits until it is shown: everything
// published before it has been handled.
func marker(c *chat, g *fakeGateway, title string) {
	c.t.Helper()
	g.publish(&protocol.ConversationUpdate{ConversationID: "ac_chat", Title: protocol.Ptr(title), UpdatedAt: 1})
	c.waitOut("[title] " + title)
}

func TestPipedChatWaitsForTheAnswer(t *testing.T) {
	g := newFakeGateway(t)
	c := startChat(t, g, nil)
	cfg := g.expect(protocol.TypeConfiguration)
	body := cfg.Body.(*protocol.Configuration)
	if cfg.StanzaID != 1 || body.ConversationID != nil || body.LastSequenceSeen != nil ||
		!slices.Equal(body.Features, []protocol.ConfigurationFeaturesElem{"streaming", "reasoning_steps", "tool_use"}) {
		t.Fatalf("first envelope = %+v %+v", cfg, body)
	}
	c.say("What is up?")
	c.in.Close() // `echo … | alicia chat`: input ends before the answer comes
	um := g.expect(protocol.TypeUserMessage)
	msg := um.Body.(*protocol.UserMessage)
	if um.StanzaID != 2 || um.ConversationID != "ac_chat" || msg.ConversationID != "ac_chat" || msg.Content != "What is up?" ||
		!strings.HasPrefix(msg.ID, "am_") || msg.Timestamp == nil || time.Since(time.UnixMilli(*msg.Timestamp)) > time.Minute {
		t.Fatalf("user message = %+v %+v", um, msg)
	}
	g.publish(&protocol.StartAnswer{ID: "am_a1", PreviousID: msg.ID, ConversationID: "ac_chat"})
	g.publish(sentence("am_a1", 1, "Not much."))
	g.publish(sentence("am_a1", 2, "The sky,\nmostly."))
	c.waitOut("alicia> Not much. The sky, mostly.")
	select {
	case err := <-c.done:
		t.Fatalf("the chat ended (%v) before the answer did", err)
	default:
	}
	g.publish(final("am_a1", 3, "And you?"))
	if err := c.end(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.out.String(), "you> What is up?\nalicia> Not much. The sky, mostly. And you?\n"; got != want {
		t.Fatalf("output:\n%q\nwant:\n%q", got, want)
	}
	if !strings.Contains(c.err.String(), "New conversation ac_chat") {
		t.Fatalf("stderr = %q, want the conversation id", c.err.String())
	}
}

func TestSideLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		color bool
		want  []string
	}{
		{"plain without a terminal", false, []string{
			"you> What is 6*7?",
			"  [memory] The user likes maths (0.83)",
			"  [reasoning] Multiply six by seven.",
			`  [tool] calculator({"expression":"6*7"})`,
			"  [tool] calculator → 42",
			`  [tool] web_search({"q":"six times seven"})`,
			"  [tool] web_search failed (timeout): took too long",
			"alicia> It is 42.",
			"  [branch] new version am_a2 of the reply to am_u (2 versions): Forty-two.",
			"  [title] Multiplication",
		}},
		{"dimmed on a terminal", true, []string{
			"\x1b[1myou>\x1b[0m What is 6*7?",
			"  \x1b[2m[memory] The user likes maths (0.83)\x1b[0m",
			"  \x1b[2m[reasoning] Multiply six by seven.\x1b[0m",
			"  \x1b[2m[tool] calculator({\"expression\":\"6*7\"})\x1b[0m",
			"  \x1b[2m[tool] calculator → 42\x1b[0m",
			"  \x1b[2m[tool] web_search({\"q\":\"six times seven\"})\x1b[0m",
			"  \x1b[2m[tool] web_search failed (timeout): took too long\x1b[0m",
			"\x1b[1malicia> \x1b[0mIt is 42.",
			"  \x1b[2m[branch] new version am_a2 of the reply to am_u (2 versions): Forty-two.\x1b[0m",
			"  \x1b[2m[title] Multiplication\x1b[0m",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGateway(t)
			c := startChat(t, g, func(o *chatcmd.Options) { o.Style = style.Style{Color: tc.color} })
			g.expect(protocol.TypeConfiguration)
			c.say("What is 6*7?")
			um := g.expect(protocol.TypeUserMessage)
			id := um.Body.(*protocol.UserMessage).ID
			g.publish(&protocol.StartAnswer{ID: "am_a", PreviousID: id, ConversationID: "ac_chat"})
			g.publish(&protocol.MemoryTrace{ID: "amu_1", MessageID: "am_a", ConversationID: "ac_chat", MemoryID: "amem_1", Content: "The user likes maths", Relevance: 0.834})
			g.publish(&protocol.ReasoningStep{ID: "ar_1", MessageID: "am_a", ConversationID: "ac_chat", Sequence: 1, Content: "Multiply six by seven."})
			g.publish(&protocol.ToolUseRequest{ID: "atu_1", MessageID: "am_a", ConversationID: "ac_chat", ToolName: "calculator", Parameters: map[string]any{"expression": "6*7"}, Execution: "server"})
			g.publish(&protocol.ToolUseResult{ID: "atr_1", RequestID: "atu_1", ConversationID: "ac_chat", Success: true, Result: 42})
			g.publish(&protocol.ToolUseRequest{ID: "atu_2", MessageID: "am_a", ConversationID: "ac_chat", ToolName: "web_search", Parameters: map[string]any{"q": "six times seven"}, Execution: "server"})
			g.publish(&protocol.ToolUseResult{ID: "atr_2", RequestID: "atu_2", ConversationID: "ac_chat", Success: false,
				ErrorCode: protocol.Ptr(protocol.ToolUseResultErrorCodeTimeout), ErrorMessage: protocol.Ptr("took too long")})
			g.publish(final("am_a", 1, "It is 42."))
			g.publish(&protocol.BranchUpdate{ConversationID: "ac_chat", ParentMessageID: "am_u", SiblingIds: []string{"am_a", "am_a2"},
				NewSibling: protocol.BranchUpdateNewSibling{ID: "am_a2", Content: "Forty-two.", CreatedAt: 1}})
			g.publish(&protocol.ConversationUpdate{ConversationID: "ac_chat", Title: protocol.Ptr("Multiplication"), UpdatedAt: 1})
			c.waitOut("[title] Multiplication")
			if err := c.end(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimSuffix(c.out.String(), "\n"), "\n"); !slices.Equal(got, tc.want) {
				t.Fatalf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestCtrlCStopsTheAnswer(t *testing.T) {
	g := newFakeGateway(t)
	c := startChat(t, g, nil)
	g.expect(protocol.TypeConfiguration)
	c.say("Tell me a story")
	um := g.expect(protocol.TypeUserMessage)
	answerStart := &protocol.StartAnswer{ID: "am_s", PreviousID: um.Body.(*protocol.UserMessage).ID, ConversationID: "ac_chat"}
	g.publish(answerStart)
	g.publish(sentence("am_s", 1, "Once upon a time."))
	c.waitOut("alicia> Once upon a time.")

	c.ints <- interrupt
	stop := g.expect(protocol.TypeControlStop)
	body := stop.Body.(*protocol.ControlStop)
	if stop.StanzaID != 3 || body.TargetID == nil || *body.TargetID != "am_s" || body.StopType == nil || *body.StopType != protocol.ControlStopStopTypeGeneration {
		t.Fatalf("stop = %+v %+v", stop, body)
	}
	c.waitOut("alicia> Once upon a time. [stopped]\n")
	g.publish(final("am_s", 2, "There was a dragon.")) // already on its way: not shown
	marker(c, g, "after the stop")

	// The session goes on; a stop before the answer began has no target, and
	// the answer that still comes is not shown.
	c.say("Something else")
	um2 := g.expect(protocol.TypeUserMessage)
	c.ints <- interrupt
	if stop := g.expect(protocol.TypeControlStop); stop.Body.(*protocol.ControlStop).TargetID != nil {
		t.Fatalf("stop before the answer began = %+v", stop.Body)
	}
	answer(g, "am_late", um2.Body.(*protocol.UserMessage).ID, "Too late.")
	marker(c, g, "after the early stop")

	c.say("Last one")
	um3 := g.expect(protocol.TypeUserMessage)
	answer(g, "am_l", um3.Body.(*protocol.UserMessage).ID, "Short.")
	c.waitOut("alicia> Short.\n")
	c.ints <- interrupt // at the prompt: leave
	select {
	case err := <-c.done:
		c.done <- err
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-C at the prompt did not end the chat")
	}
	for _, hidden := range []string{"dragon", "Too late"} {
		if strings.Contains(c.out.String(), hidden) {
			t.Fatalf("a stopped answer went on printing %q:\n%s", hidden, c.out.String())
		}
	}
	if !strings.Contains(c.out.String(), "[stopped] the answer was stopped before it began") {
		t.Fatalf("output:\n%s", c.out.String())
	}
}

func TestRegenerateAndEdit(t *testing.T) {
	g := newFakeGateway(t)
	c := startChat(t, g, nil)
	g.expect(protocol.TypeConfiguration)

	c.say("/regenerate")
	c.say("/edit nothing yet")
	c.say("/help")
	c.waitOut("/regenerate     a new version of the last answer")
	g.nothingMore()
	if out := c.out.String(); !strings.Contains(out, "[error] there is no answer to regenerate yet") || !strings.Contains(out, "[error] there is no message of yours to edit yet") {
		t.Fatalf("output:\n%s", out)
	}

	c.say("What is 2+2?")
	um := g.expect(protocol.TypeUserMessage).Body.(*protocol.UserMessage)
	answer(g, "am_a1", um.ID, "4.")
	c.waitOut("alicia> 4.\n")

	c.say("/regenerate")
	regen := g.expect(protocol.TypeControlVariation)
	if v := regen.Body.(*protocol.ControlVariation); regen.StanzaID != 3 || v.TargetID != "am_a1" || v.Mode != protocol.ControlVariationModeRegenerate || v.NewContent != nil || v.ConversationID != "ac_chat" {
		t.Fatalf("regenerate = %+v %+v", regen, v)
	}
	g.publish(&protocol.BranchUpdate{ConversationID: "ac_chat", ParentMessageID: um.ID, SiblingIds: []string{"am_a1", "am_a2"},
		NewSibling: protocol.BranchUpdateNewSibling{ID: "am_a2", Content: "Four.", CreatedAt: 1}})
	answer(g, "am_a2", um.ID, "Four.")
	c.waitOut("alicia> Four.\n")

	c.say("/edit What is 3+3?")
	edit := g.expect(protocol.TypeControlVariation)
	if v := edit.Body.(*protocol.ControlVariation); v.TargetID != um.ID || v.Mode != protocol.ControlVariationModeEdit || v.NewContent == nil || *v.NewContent != "What is 3+3?" {
		t.Fatalf("edit = %+v", v)
	}
	answer(g, "am_a3", "am_u2", "6.") // the answer to the edited sibling am_u2
	c.waitOut("alicia> 6.\n")

	c.say("/edit")
	c.say("/bogus")
	c.say("//slash is a message")
	if got := g.expect(protocol.TypeUserMessage).Body.(*protocol.UserMessage).Content; got != "/slash is a message" {
		t.Fatalf("//… sent %q", got)
	}
	if out := c.out.String(); !strings.Contains(out, "[error] usage: /edit <new text of your last message>") || !strings.Contains(out, "[error] unknown command /bogus") {
		t.Fatalf("output:\n%s", out)
	}
	answer(g, "am_a4", "am_u5", "Noted.")
	c.waitOut("alicia> Noted.\n")

	// The targets follow the branch: the latest answer and the message it answers.
	c.say("/regenerate")
	if v := g.expect(protocol.TypeControlVariation).Body.(*protocol.ControlVariation); v.TargetID != "am_a4" {
		t.Fatalf("regenerate after the edit targets %s", v.TargetID)
	}
	answer(g, "am_a5", "am_u5", "Noted again.")
	c.waitOut("alicia> Noted again.\n")
	c.say("/edit changed")
	if v := g.expect(protocol.TypeControlVariation).Body.(*protocol.ControlVariation); v.TargetID != "am_u5" {
		t.Fatalf("edit targets %s, want am_u5", v.TargetID)
	}
	answer(g, "am_a6", "am_u6", "Changed.")
	c.waitOut("alicia> Changed.\n")
	c.say("/quit")
	c.say("never sent")
	if err := c.end(); err != nil {
		t.Fatal(err)
	}
	g.nothingMore()
	if !strings.Contains(c.out.String(), "you (edited)> What is 3+3?\n") {
		t.Fatalf("output:\n%s", c.out.String())
	}
}

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
		Conversation: api.Conversation{ID: "ac_chat", Title: "Old chat", Status: "active", LastClientStanzaID: protocol.Ptr[int32](41)},
		Messages: []api.Message{
			{ID: "am_u0", Role: "user", Content: "Remember me?", Status: "completed"},
			{ID: "am_a0", PreviousID: "am_u0", Role: "assistant", Content: "Of course.", Status: "completed"},
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

func TestResumeWithoutStoredStanzaStartsAboveOldSessions(t *testing.T) {
	g := newFakeGateway(t)
	g.rest.Add(api.ConversationDetail{Conversation: api.Conversation{ID: "ac_chat", Status: "active"}})
	startChat(t, g, func(o *chatcmd.Options) { o.ConversationID = "ac_chat" })
	cfg := g.expect(protocol.TypeConfiguration)
	since := int32(time.Since(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) / time.Second)
	if cfg.StanzaID < since-5 || cfg.StanzaID > since+5 {
		t.Fatalf("stanza id %d, want about %d", cfg.StanzaID, since)
	}
}

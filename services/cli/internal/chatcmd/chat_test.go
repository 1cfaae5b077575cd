package chatcmd_test

import (
	"context"
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

package chatcmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// Text a hostile model or server could send: clear the screen, set the
// window title, a C1 CSI, a bare CR that rewrites the line, a right-to-left
// override. (Envelopes with bytes that are not UTF-8 are refused by
// protocol.Decode; TestPrintable covers them.)
const (
	clearScreen    = "\x1b[2J\x1b[H"
	setTitle       = "\x1b]0;owned\x07"
	hostileRefusal = setTitle + "denied" + clearScreen
)

// rawControls finds what must never reach a terminal from the server in
// out, once the CLI's own colours (known SGR codes) are taken out.
func rawControls(out string) []string {
	out = strings.NewReplacer("\x1b[0m", "", "\x1b[1m", "", "\x1b[2m", "", "\x1b[31m", "").Replace(out)
	var found []string
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u009b", "\x9b", "\u202e", "\u0085"} {
		if strings.Contains(out, bad) {
			found = append(found, bad)
		}
	}
	return found
}

// TestServerTextCannotDriveTheTerminal plays a conversation whose history,
// answer, side lines, errors and title are full of escape sequences: none
// reaches stdout or stderr raw, each is shown as a visible escape, and
// ordinary Unicode passes unchanged.
func TestServerTextCannotDriveTheTerminal(t *testing.T) {
	for _, color := range []bool{false, true} {
		name := "plain"
		if color {
			name = "colours"
		}
		t.Run(name, func(t *testing.T) {
			g := newFakeGateway(t)
			g.rest.Add(api.ConversationDetail{
				Conversation: api.Conversation{ID: "ac_chat", Title: setTitle + "Old chat", Status: "active"},
				Messages: []api.Message{
					{ID: "am_u0", Role: "user", Content: "hello", Status: "completed"},
					{ID: "am_a0", PreviousID: protocol.Ptr("am_u0"), Role: "assistant\x1b[8m", Content: "stored" + clearScreen + "answer", Status: "completed",
						MemoriesUsed: []api.MemoryUse{{Content: "mem\u009bory"}},
						Reasoning:    []api.Reasoning{{Content: "step\x1b[1A"}},
						ToolUses: []api.ToolUse{{ToolName: "web\x1b[31m", Status: "completed",
							Arguments: jsonOf(map[string]any{"q\u202e": []any{"\x1b]8;;x\x07"}}), Result: jsonOf("\u009b2J")}}},
				},
			})
			c := startChat(t, g, func(o *chatcmd.Options) {
				o.ConversationID, o.Interactive, o.Style = "ac_chat", true, style.Style{Color: color}
			})
			g.expect(protocol.TypeConfiguration)
			c.waitOut("you> ")
			c.say("go")
			um := g.expect(protocol.TypeUserMessage).Body.(*protocol.UserMessage)
			g.publish(&protocol.StartAnswer{ID: "am_a", PreviousID: um.ID, ConversationID: "ac_chat"})
			g.publish(&protocol.MemoryTrace{ID: "amu_1", MessageID: "am_a", ConversationID: "ac_chat", MemoryID: "amem_1", Content: "likes " + clearScreen, Relevance: 0.5})
			g.publish(&protocol.ReasoningStep{ID: "ar_1", MessageID: "am_a", ConversationID: "ac_chat", Sequence: 1, Content: "think\rOVERWRITTEN"})
			g.publish(&protocol.Commentary{ID: "ac_1", MessageID: "am_a", ConversationID: "ac_chat", Content: "note\u0085"})
			g.publish(&protocol.ToolUseRequest{ID: "atu_1", MessageID: "am_a", ConversationID: "ac_chat", ToolName: "calc\x1b[5m",
				Parameters: map[string]any{"expression": setTitle}, Execution: "server"})
			g.publish(&protocol.ToolUseResult{ID: "atr_1", RequestID: "atu_1", ConversationID: "ac_chat", Success: true, Result: "\u202e24"})
			g.publish(&protocol.ToolUseRequest{ID: "atu_2", MessageID: "am_a", ConversationID: "ac_chat", ToolName: "fetch", Parameters: map[string]any{}, Execution: "server"})
			g.publish(&protocol.ToolUseResult{ID: "atr_2", RequestID: "atu_2", ConversationID: "ac_chat", Success: false,
				ErrorCode: protocol.Ptr(protocol.ToolUseResultErrorCodeTimeout), ErrorMessage: protocol.Ptr("slow" + clearScreen)})
			g.publish(sentence("am_a", 1, "Grüße, 世界."+clearScreen))
			g.publish(sentence("am_a", 2, setTitle+"\u009b31m\u202eevil"))
			g.publish(final("am_a", 3, "Done."))
			g.publish(&protocol.BranchUpdate{ConversationID: "ac_chat", ParentMessageID: "am_u0", SiblingIds: []string{"am_a0", "am_a"},
				NewSibling: protocol.BranchUpdateNewSibling{ID: "am_a", Content: "v2" + clearScreen, CreatedAt: 1}})
			g.publish(&protocol.Transcription{ID: "am_v", ConversationID: "ac_chat", Final: true, Text: "spoken" + setTitle})
			g.publish(&protocol.ErrorMessage{ID: "aerr_1", ConversationID: "ac_chat", Code: protocol.CodeBackendUnavailable, Message: "down" + clearScreen, Severity: 1})
			g.publish(&protocol.ConversationUpdate{ConversationID: "ac_chat", Status: protocol.Ptr("archived\x1b[8m"), UpdatedAt: 1})
			g.publish(&protocol.ConversationUpdate{ConversationID: "ac_chat", Title: protocol.Ptr(setTitle + "the end"), UpdatedAt: 1})
			c.waitOut("the end")
			if err := c.end(); err != nil {
				t.Fatal(err)
			}
			out, stderr := c.out.String(), c.err.String()
			if found := rawControls(out); len(found) > 0 {
				t.Fatalf("stdout holds %q:\n%q", found, out)
			}
			if found := rawControls(stderr); len(found) > 0 || strings.Contains(stderr, "\x1b") {
				t.Fatalf("stderr holds %q:\n%q", found, stderr)
			}
			for _, shown := range []string{
				`\x1b]0;owned\x07Old chat`,                   // the title of the history
				`stored\x1b[2J\x1b[Hanswer`,                  // a stored answer
				`mem\u009bory`, `step\x1b[1A`, `web\x1b[31m`, // its memory, reasoning, tool
				`\u009b2J`, `q\\u202e`, `\\x1b]8;;x\\x07`, // the tool's result and arguments (in JSON)
				`likes \x1b[2J\x1b[H`, `think\x0dOVERWRITTEN`, // memory, reasoning
				`note\u0085`, `calc\x1b[5m`, `\u202e24`, `slow\x1b[2J\x1b[H`,
				`Grüße, 世界.\x1b[2J\x1b[H \x1b]0;owned\x07\u009b31m\u202eevil Done.`,
				`v2\x1b[2J\x1b[H`, `spoken\x1b]0;owned\x07`, `down\x1b[2J\x1b[H`, `archived\x1b[8m`,
				`[title] \x1b]0;owned\x07the end`,
			} {
				if !strings.Contains(out, shown) {
					t.Errorf("stdout does not show %s:\n%s", shown, out)
				}
			}
		})
	}
}

// TestRefusalIsPrintable: the error Run returns (main prints it) shows a
// server's escape sequences as text and is still ErrRejected.
func TestRefusalIsPrintable(t *testing.T) {
	g := newFakeGateway(t)
	g.rest.Add(api.ConversationDetail{Conversation: api.Conversation{ID: "ac_hostile", Status: "active"}})
	client, err := api.New(g.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	err = chatcmd.Run(context.Background(), chatcmd.Options{API: client, ConversationID: "ac_hostile", In: strings.NewReader("hi\n")})
	if !errors.Is(err, chatcmd.ErrRejected) {
		t.Fatalf("error %v is not ErrRejected", err)
	}
	if msg := err.Error(); len(rawControls(msg)) > 0 || !strings.Contains(msg, `\x1b]0;owned\x07denied\x1b[2J\x1b[H`) {
		t.Fatalf("error = %q, want the escapes shown as text", msg)
	}
}

// jsonOf is v as a stored JSON value.
func jsonOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

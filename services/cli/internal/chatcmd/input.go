package chatcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// readLines delivers the lines of in; the channel closes at EOF. It stops
// handing lines over once quit is closed (a read already under way ends with
// the input).
func readLines(in io.Reader, quit <-chan struct{}) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), protocol.MaxEnvelopeSize)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				return
			}
		}
	}()
	return lines
}

const help = `Type a message and press Enter. Commands:
  /regenerate     a new version of the last answer
  /edit <text>    replace your last message with <text> and get a new answer
  /help           this help
  /quit           leave (Ctrl-D too)
Ctrl-C stops an answer while it streams; at the prompt it leaves.
A message that starts with / is sent as is when written //…`

// handleLine sends a message or runs a command.
func (s *session) handleLine(ctx context.Context, line string) error {
	text := strings.TrimSpace(line)
	if text == "" {
		return nil
	}
	if rest, ok := strings.CutPrefix(text, "/"); ok && !strings.HasPrefix(rest, "/") {
		cmd, arg, _ := strings.Cut(rest, " ")
		arg = strings.TrimSpace(arg)
		switch cmd {
		case "quit", "exit":
			return errQuit
		case "help", "?":
			s.p.plain(help)
		case "regenerate":
			s.regenerate(ctx)
		case "edit":
			s.edit(ctx, arg)
		default:
			s.p.errorLine(0, fmt.Sprintf("unknown command /%s; /help lists the commands", cmd))
		}
		return nil
	}
	if strings.HasPrefix(text, "//") {
		text = text[1:]
	}
	id := protocol.NewID("am")
	s.p.user("you", text)
	s.request(ctx, &protocol.UserMessage{ID: id, ConversationID: s.cid, Content: text, Timestamp: protocol.Ptr(time.Now().UnixMilli())})
	s.lastUser = id
	return nil
}

// request sends something that the server answers, and waits for the answer.
func (s *session) request(ctx context.Context, body protocol.Body) {
	s.awaiting, s.stopNext = true, ""
	s.touch()
	s.send(ctx, body)
}

func (s *session) regenerate(ctx context.Context) {
	if s.lastAnswer == "" {
		s.p.errorLine(0, "there is no answer to regenerate yet")
		return
	}
	s.p.aside("regenerate", "a new version of "+s.lastAnswer)
	s.request(ctx, &protocol.ControlVariation{ConversationID: s.cid, TargetID: s.lastAnswer, Mode: protocol.ControlVariationModeRegenerate})
}

func (s *session) edit(ctx context.Context, text string) {
	switch {
	case text == "":
		s.p.errorLine(0, "usage: /edit <new text of your last message>")
		return
	case s.lastUser == "":
		s.p.errorLine(0, "there is no message of yours to edit yet")
		return
	}
	s.p.user("you (edited)", text)
	s.request(ctx, &protocol.ControlVariation{ConversationID: s.cid, TargetID: s.lastUser, Mode: protocol.ControlVariationModeEdit, NewContent: protocol.Ptr(text)})
}

// stop asks the server to stop the answer being generated (the part already
// said is kept) and gives the prompt back at once; what still arrives for
// that answer is not shown.
func (s *session) stop(ctx context.Context) error {
	stop := &protocol.ControlStop{ConversationID: s.cid, StopType: protocol.Ptr(protocol.ControlStopStopTypeGeneration),
		Reason: protocol.Ptr("user interrupted")}
	if s.answerID != "" {
		stop.TargetID = protocol.Ptr(s.answerID)
		s.stopped[s.answerID] = true
	} else {
		s.stopNext = s.lastUser
	}
	s.send(ctx, stop)
	if s.p.answering {
		s.p.endAnswer("[stopped]")
	} else {
		s.p.aside("stopped", "the answer was stopped before it began")
	}
	s.endTurn(false)
	return nil
}

// historyShown is how many messages of a resumed conversation are shown.
const historyShown = 6

// resume checks the conversation through the REST API before connecting (a
// clear error when it does not exist or is someone else's), learns the last
// messages for /regenerate and /edit, and continues the client's stanza ids.
func (s *session) resume(ctx context.Context) error {
	conv, raw, err := s.o.API.GetConversation(ctx, s.cid)
	if err != nil {
		return err
	}
	for _, m := range conv.Messages {
		switch m.Role {
		case "user":
			s.lastUser = m.ID
		case "assistant":
			s.lastAnswer = m.ID
		}
	}
	s.next = firstStanza(reportedStanza(raw), time.Now())
	if s.o.Interactive && len(conv.Messages) > 0 {
		title := conv.Title
		if title == "" {
			title = "(untitled)"
		}
		s.p.plain(s.o.Style.Dim(fmt.Sprintf("%s — %d messages; the last ones:", style.Printable(title), conv.MessageCount)))
		for _, m := range conv.Messages[max(0, len(conv.Messages)-historyShown):] {
			s.p.message(m)
		}
	}
	return nil
}

// stanzaEpoch anchors the fallback stanza ids (seconds since then fit an
// int32 until 2093).
var stanzaEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// reportedStanza is the conversation's lastClientStanzaId when the gateway
// sent one (the generated type reads an absent one as 0).
func reportedStanza(raw json.RawMessage) *int32 {
	var conv struct {
		LastClientStanzaID *int32 `json:"lastClientStanzaId"`
	}
	if json.Unmarshal(raw, &conv) != nil {
		return nil
	}
	return conv.LastClientStanzaID
}

// firstStanza is the first client stanza id of a resumed conversation: after
// the last one the server stored, when the gateway says which. Otherwise the
// seconds since stanzaEpoch: above the ids of any earlier session of this
// conversation that JetStream may still remember (it de-duplicates on
// {conversation}:{stanzaId} for 2 minutes), so a new message is never taken
// for an old one and dropped.
func firstStanza(lastStored *int32, now time.Time) int32 {
	if lastStored != nil && *lastStored >= 0 && *lastStored < 1<<31-1 {
		return *lastStored + 1
	}
	return int32(max(1, now.Sub(stanzaEpoch)/time.Second))
}

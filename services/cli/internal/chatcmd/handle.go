package chatcmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/convcmd"
)

// handleFrame shows one envelope from the server. Server envelopes carry
// decreasing negative stanza ids; one not below the last seen was already
// shown (a replay overlapping what arrived before a drop) and is skipped.
// Envelopes without a stanza id (errors about our own input) are never
// replays.
func (s *session) handleFrame(frame []byte) error {
	env, err := protocol.Decode(frame)
	if err != nil {
		s.p.note("ignored an envelope the CLI cannot read: %v", err)
		return nil
	}
	if env.StanzaID < 0 {
		if s.lastSeen != 0 && env.StanzaID >= s.lastSeen {
			return nil
		}
		s.lastSeen = env.StanzaID
	}
	return s.handle(env)
}

func (s *session) handle(env protocol.Envelope) error {
	switch b := env.Body.(type) {
	case *protocol.Configuration:
		if s.configured || b.ConversationID == nil {
			return nil // another connection's answer, replayed
		}
		s.configured = true
		if s.announced {
			return nil
		}
		s.announced = true
		if s.cid == "" {
			s.cid = *b.ConversationID
			s.p.note("New conversation %s%s", s.cid, s.hint())
		} else {
			s.p.note("Conversation %s%s", s.cid, s.hint())
		}
	case *protocol.StartAnswer:
		s.startAnswer(b.ID, b.PreviousID)
	case *protocol.AssistantSentence:
		if s.stopped[b.PreviousID] {
			return nil
		}
		if b.PreviousID != s.answerID {
			s.startAnswer(b.PreviousID, "") // resumed or joined in the middle of an answer
		}
		s.touch()
		s.p.sentence(b.Text)
		if b.IsFinal != nil && *b.IsFinal {
			s.p.endAnswer("")
			s.endTurn(false)
		}
	case *protocol.AssistantMessage:
		if s.stopped[b.ID] {
			return nil
		}
		s.lastAnswer = b.ID
		if b.PreviousID != nil {
			s.lastUser = *b.PreviousID
		}
		s.p.startAnswer()
		s.p.sentence(b.Content)
		s.p.endAnswer("")
		s.endTurn(false)
	case *protocol.ReasoningStep:
		s.aside(b.MessageID, "reasoning", b.Content)
	case *protocol.ToolUseRequest:
		s.toolNames[b.ID], s.toolAnswer[b.ID] = b.ToolName, b.MessageID
		s.aside(b.MessageID, "tool", convcmd.ToolCall(b.ToolName, map[string]any(b.Parameters)))
	case *protocol.ToolUseResult:
		name := s.toolNames[b.RequestID]
		if name == "" {
			name = b.RequestID
		}
		code := ""
		if b.ErrorCode != nil {
			code = string(*b.ErrorCode)
		}
		errMsg := ""
		if b.ErrorMessage != nil {
			errMsg = *b.ErrorMessage
		}
		s.aside(s.toolAnswer[b.RequestID], "tool", name+" "+convcmd.ToolOutcome(b.Success, b.Result, code, errMsg))
	case *protocol.MemoryTrace:
		s.aside(b.MessageID, "memory", fmt.Sprintf("%s (%.2f)", b.Content, b.Relevance))
	case *protocol.Commentary:
		s.aside(b.MessageID, "commentary", b.Content)
	case *protocol.ErrorMessage:
		return s.serverError(b)
	case *protocol.BranchUpdate:
		s.touch()
		s.p.aside("branch", fmt.Sprintf("new version %s of the reply to %s (%d versions): %s",
			b.NewSibling.ID, b.ParentMessageID, len(b.SiblingIds), clip(b.NewSibling.Content, 100)))
	case *protocol.ConversationUpdate:
		if b.Title != nil {
			s.p.aside("title", *b.Title)
		}
		if b.Status != nil && *b.Status != "active" {
			s.p.aside("status", *b.Status)
		}
	case *protocol.Transcription:
		if b.Final {
			s.lastUser = b.ID
			s.p.said("you (voice)", b.Text)
		}
	case *protocol.MemoryConfirmation:
		s.p.aside("memory", fmt.Sprintf("%s %s", b.Action, b.MemoryID))
	}
	return nil
}

func (s *session) hint() string {
	if s.o.Interactive {
		return ". Type a message; /help lists the commands."
	}
	return ""
}

// touch records a sign of life of the awaited answer.
func (s *session) touch() { s.lastEvent = time.Now() }

// startAnswer opens the answer id to the user message prev ("" when unknown).
func (s *session) startAnswer(id, prev string) {
	if prev != "" && prev == s.stopNext && !s.awaiting {
		s.stopped[id] = true // the answer to a message stopped before it began
		return
	}
	if s.stopped[id] {
		return
	}
	if s.answerID != "" && s.answerID != id {
		s.p.endAnswer("")
	}
	s.answerID, s.lastAnswer, s.awaiting = id, id, false
	if prev != "" {
		s.lastUser = prev
	}
	s.touch()
	s.p.startAnswer()
}

// aside shows a side line that belongs to answer (skipped when the user
// stopped that answer).
func (s *session) aside(answer, kind, text string) {
	if answer != "" && s.stopped[answer] {
		return
	}
	s.touch()
	s.p.aside(kind, text)
}

// serverError shows an ErrorMessage. An error (severity ≥ 2) during a turn
// ends it; one before the conversation is confirmed (not found, another
// user's, the server could not start it) ends the chat.
func (s *session) serverError(b *protocol.ErrorMessage) error {
	if !s.configured && b.Severity >= 2 {
		return fmt.Errorf("%w: error %d: %s", ErrRejected, b.Code, b.Message)
	}
	if b.Severity >= 2 && s.busy() {
		s.p.endAnswer("")
		s.p.errorLine(b.Code, b.Message)
		s.endTurn(true)
		return nil
	}
	s.p.errorLine(b.Code, b.Message)
	return nil
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

package timeline

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// summarize gives the one-line gist of an envelope body for the timeline.
func summarize(env protocol.Envelope) string {
	switch b := env.Body.(type) {
	case *protocol.UserMessage:
		return quote(b.Content)
	case *protocol.AssistantMessage:
		return quote(b.Content)
	case *protocol.StartAnswer:
		return fmt.Sprintf("answer %s to %s", b.ID, b.PreviousID)
	case *protocol.AssistantSentence:
		final := ""
		if b.IsFinal != nil && *b.IsFinal {
			final = " (final)"
		}
		return fmt.Sprintf("#%d %s%s", b.Sequence, quote(b.Text), final)
	case *protocol.Transcription:
		kind := "partial"
		if b.Final {
			kind = "final"
		}
		return fmt.Sprintf("%s %s", kind, quote(b.Text))
	case *protocol.ToolUseRequest:
		args, _ := json.Marshal(b.Parameters)
		return fmt.Sprintf("%s(%s)", b.ToolName, clip(string(args), 80))
	case *protocol.ToolUseResult:
		if !b.Success {
			return fmt.Sprintf("%s failed: %s", b.RequestID, clip(deref(b.ErrorMessage), 80))
		}
		res, _ := json.Marshal(b.Result)
		return fmt.Sprintf("%s → %s", b.RequestID, clip(string(res), 80))
	case *protocol.ReasoningStep:
		return fmt.Sprintf("#%d %s", b.Sequence, quote(b.Content))
	case *protocol.MemoryTrace:
		return fmt.Sprintf("%s (%.2f) %s", b.MemoryID, b.Relevance, quote(b.Content))
	case *protocol.ErrorMessage:
		return fmt.Sprintf("%d %s", b.Code, quote(b.Message))
	case *protocol.ControlStop:
		return fmt.Sprintf("stop %s %s", deref(b.TargetID), deref((*string)(b.StopType)))
	case *protocol.ControlVariation:
		return fmt.Sprintf("%s %s", b.Mode, b.TargetID)
	case *protocol.Configuration:
		parts := []string{}
		if b.ConversationID == nil {
			parts = append(parts, "new conversation")
		}
		if b.LastSequenceSeen != nil {
			parts = append(parts, fmt.Sprintf("resume after %d", *b.LastSequenceSeen))
		}
		if b.ClientVersion != nil {
			parts = append(parts, "client "+*b.ClientVersion)
		}
		return strings.Join(parts, ", ")
	case *protocol.Feedback:
		return fmt.Sprintf("%s on %s %s", b.Vote, b.TargetType, b.TargetID)
	case *protocol.UserNote:
		return fmt.Sprintf("%s %s: %s", b.Action, b.Category, quote(b.Content))
	case *protocol.MemoryAction:
		if b.Memory != nil {
			return fmt.Sprintf("%s %s", b.Action, quote(b.Memory.Content))
		}
		return string(b.Action)
	case *protocol.BranchUpdate:
		return fmt.Sprintf("sibling %s of %s", b.NewSibling.ID, b.ParentMessageID)
	case *protocol.AudioChunk:
		return fmt.Sprintf("%s #%d %d ms", b.Format, b.Sequence, b.DurationMs)
	case *protocol.SentenceAudio:
		return fmt.Sprintf("%s #%d %s %d ms, %d bytes", b.MessageID, b.Sequence, b.Format, b.DurationMs, b.ByteSize)
	case *protocol.SentencePlayout:
		return fmt.Sprintf("%s #%d %s after %d ms", b.MessageID, b.Sequence, b.Status, b.PlayedMs)
	case *protocol.TurnEvent:
		return turnEvent(b)
	default:
		return ""
	}
}

func quote(s string) string { return fmt.Sprintf("%q", clip(s, 100)) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// turnEvent: "preempt_cancelled of am_u "What is the" (speech_resumed)
// after 240 ms", "false_interruption by am_u: am_a resumed from as_2
// (no_words) after 800 ms".
func turnEvent(b *protocol.TurnEvent) string {
	var sb strings.Builder
	sb.WriteString(string(b.Kind))
	switch b.Kind {
	case protocol.TurnEventKindPreemptCancelled:
		if b.UtteranceID != nil {
			sb.WriteString(" of " + *b.UtteranceID)
		}
		if b.Transcript != nil {
			sb.WriteString(" " + quote(*b.Transcript))
		}
	default:
		if b.UtteranceID != nil {
			sb.WriteString(" by " + *b.UtteranceID)
		}
		if b.MessageID != nil {
			sb.WriteString(": " + *b.MessageID + " resumed")
			if b.SentenceID != nil {
				sb.WriteString(" from " + *b.SentenceID)
			}
		}
	}
	if b.Reason != nil {
		sb.WriteString(" (" + *b.Reason + ")")
	}
	if b.HeldMs != nil {
		fmt.Fprintf(&sb, " after %d ms", *b.HeldMs)
	}
	return sb.String()
}

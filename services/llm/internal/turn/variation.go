package turn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
)

// editSpec is the new user message an edit publishes before answering it.
type editSpec struct {
	id, parent, content string
}

func (e *Engine) answerMessage(ctx context.Context, q queue.Turn, um *protocol.UserMessage) error {
	return e.run(ctx, q, plan{kind: kindMessage, assistantID: assistantID(q), parentID: um.ID, userText: um.Content, userMsg: um})
}

// vary answers a ControlVariation with a new sibling of its target:
//   - regenerate (an assistant message): a new answer to the same user message;
//   - edit (a user message): a new user message with newContent, then its answer;
//   - continue (an assistant message): a new answer that starts with the
//     target's text and goes on from it.
func (e *Engine) vary(ctx context.Context, q queue.Turn, v *protocol.ControlVariation) error {
	cid := q.ConversationID
	wctx, cancel := context.WithTimeout(ctx, e.s.HistoryTimeout)
	defer cancel()
	minSeq := q.Sequence - 1
	if last, _, err := e.lastServerSequence(wctx, cid); err == nil {
		minSeq = max(minSeq, last)
	}
	if err := rpc.WaitApplied(wctx, e.d.NC, bus.StreamConversations, minSeq); err != nil {
		e.d.Metrics.Errors.WithLabelValues("history").Inc()
		return fmt.Errorf("variation: wait for persistence: %w", err)
	}
	target, err := e.d.Messages.Message(wctx, cid, v.TargetID)
	if errors.Is(err, store.ErrNotFound) {
		return e.reject(ctx, q, protocol.CodeNotFound, fmt.Sprintf("Message %s is not in this conversation.", v.TargetID))
	}
	if err != nil {
		return err
	}
	p := plan{kind: string(v.Mode), assistantID: assistantID(q)}
	switch v.Mode {
	case protocol.ControlVariationModeRegenerate, protocol.ControlVariationModeContinue:
		if target.Role != "assistant" || target.PreviousID == nil {
			return e.reject(ctx, q, protocol.CodeInvalidState, fmt.Sprintf("%s needs an assistant message that answers a user message; %s is not one.", v.Mode, v.TargetID))
		}
		parent, err := e.d.Messages.Message(wctx, cid, *target.PreviousID)
		if err != nil {
			return err
		}
		if p.history, err = e.before(wctx, cid, parent); err != nil {
			return err
		}
		p.parentID, p.userText, p.branchParent = parent.ID, parent.Contents, parent.ID
		if v.Mode == protocol.ControlVariationModeContinue {
			p.prefix = target.Contents
		}
	case protocol.ControlVariationModeEdit:
		switch {
		case target.Role != "user":
			return e.reject(ctx, q, protocol.CodeInvalidState, fmt.Sprintf("edit needs a user message; %s is not one.", v.TargetID))
		case v.NewContent == nil || strings.TrimSpace(*v.NewContent) == "":
			return e.reject(ctx, q, protocol.CodeInvalidState, "edit needs newContent.")
		case target.PreviousID == nil:
			// A UserMessage without previousId is chained to the branch
			// head, so a sibling of a conversation's first message cannot
			// be expressed in the protocol.
			return e.reject(ctx, q, protocol.CodeInvalidState, "The first message of a conversation cannot be edited; start a new conversation instead.")
		}
		parent := *target.PreviousID
		if p.history, err = e.d.Messages.Chain(wctx, cid, parent, e.s.HistoryLimit); err != nil {
			return err
		}
		p.edit = &editSpec{id: protocol.DeriveID("am", cid, q.Sequence, "edit"), parent: parent, content: *v.NewContent}
		p.parentID, p.userText = p.edit.id, p.edit.content
	default:
		return e.reject(ctx, q, protocol.CodeInvalidState, fmt.Sprintf("Unknown variation mode %q.", v.Mode))
	}
	return e.run(ctx, q, p)
}

// before is the branch that leads to m, m excluded.
func (e *Engine) before(ctx context.Context, cid string, m store.Message) ([]rpc.HistoryMessage, error) {
	if m.PreviousID == nil {
		return nil, nil
	}
	return e.d.Messages.Chain(ctx, cid, *m.PreviousID, e.s.HistoryLimit)
}

// reject tells the client a variation cannot be done; the turn is over.
func (e *Engine) reject(ctx context.Context, q queue.Turn, code int32, msg string) error {
	e.d.Metrics.Errors.WithLabelValues("bad_target").Inc()
	log := telemetry.ForConversation(e.d.Log, q.ConversationID)
	log.Info().Int32("code", code).Msg("variation rejected")
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.s.PublishTimeout)
	defer cancel()
	env := errorEnvelope(q.ConversationID, "", code, true, msg)
	_, err := e.d.Publisher.PublishServer(pctx, env, assistantID(q)+":reject")
	return err
}

// branchUpdate tells the client (and persistence: the branch head) that
// newID is a new sibling after parent.
func (t *turn) branchUpdate(parent, newID, content string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), t.e.s.HistoryTimeout)
	defer cancel()
	sibs, err := t.e.d.Messages.Siblings(ctx, t.cid, parent)
	if err != nil {
		t.log.Warn().Err(err).Msg("siblings unknown")
	}
	if !slices.Contains(sibs, newID) {
		sibs = append(sibs, newID)
	}
	t.out.send(protocol.New(t.cid, &protocol.BranchUpdate{ConversationID: t.cid, ParentMessageID: parent, SiblingIds: sibs,
		NewSibling: protocol.BranchUpdateNewSibling{ID: newID, Content: content, CreatedAt: time.Now().UnixMilli()}}), newID+":branch")
}

// sendEdit publishes the edited user message as a server envelope (the
// client sees it; persistence stores it by type) and its BranchUpdate, before
// the answer, so the branch head ends on the answer.
func (t *turn) sendEdit(ed *editSpec) {
	t.out.send(protocol.New(t.cid, &protocol.UserMessage{ID: ed.id, PreviousID: &ed.parent, ConversationID: t.cid,
		Content: ed.content, Timestamp: protocol.Ptr(time.Now().UnixMilli())}), ed.id)
	t.branchUpdate(ed.parent, ed.id, ed.content)
}

package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

var targetTypes = []string{"message", "sentence", "tool_use", "memory", "reasoning", "memory_usage"}

// message reads the path's message id after the ownership check and returns
// it with its conversation.
func (a *API) message(c echo.Context) (mid, cid string, err error) {
	if mid, err = pathID(c, "id"); err != nil {
		return "", "", err
	}
	cid, err = a.Store.MessageConversation(c.Request().Context(), auth.UserOf(c), mid)
	if err != nil {
		return "", "", lookup(err, "message")
	}
	return mid, cid, nil
}

// vote publishes a Feedback envelope on the conversation (as a client would)
// and answers with the target's aggregates once it is applied.
func (a *API) vote(c echo.Context) error {
	var in restapi.VoteRequest
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if err := oneOf("vote", in.Vote, "up", "down", "critical", "remove"); err != nil {
		return err
	}
	if in.TargetType == "" {
		in.TargetType = "message"
	}
	if err := oneOf("targetType", in.TargetType, targetTypes...); err != nil {
		return err
	}
	if in.QuickFeedback != nil {
		if err := text("quickFeedback", *in.QuickFeedback, maxQuick, false); err != nil {
			return err
		}
	}
	if in.Note != nil {
		if err := budgetText(edge.BudgetNote, "note", *in.Note, a.budgets().NoteChars, false); err != nil {
			return err
		}
	}
	mid, cid, err := a.message(c)
	if err != nil {
		return err
	}
	if in.TargetID == "" {
		if in.TargetType != "message" {
			return fail(http.StatusBadRequest, "targetId is required for targetType %s", in.TargetType)
		}
		in.TargetID = mid
	}
	user, ctx := auth.UserOf(c), c.Request().Context()
	ok, err := a.Store.TargetExists(ctx, user, mid, in.TargetType, in.TargetID)
	if err != nil {
		return err
	}
	if !ok {
		return fail(http.StatusNotFound, "%s %q not found on message %s", in.TargetType, in.TargetID, mid)
	}
	fb := &protocol.Feedback{ID: protocol.NewID("av"), ConversationID: cid, MessageID: mid,
		TargetType: protocol.FeedbackTargetType(in.TargetType), TargetID: in.TargetID, Vote: protocol.FeedbackVote(in.Vote),
		QuickFeedback: in.QuickFeedback, Note: in.Note, Timestamp: time.Now().UnixMilli()}
	if err := a.write(c, asClient(user, protocol.New(cid, fb))); err != nil {
		return err
	}
	votes, err := a.Store.VotesOf(ctx, user, in.TargetType, in.TargetID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, votes)
}

func (a *API) listNotes(c echo.Context) error {
	mid, _, err := a.message(c)
	if err != nil {
		return err
	}
	notes, err := a.Store.Notes(c.Request().Context(), mid)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, restapi.NoteList{Notes: notes})
}

func (a *API) createNote(c echo.Context) error {
	var in restapi.NoteCreate
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if err := budgetText(edge.BudgetNote, "content", in.Content, a.budgets().NoteChars, true); err != nil {
		return err
	}
	if err := a.admitStored(c, len(in.Content)); err != nil {
		return err
	}
	if in.Category == "" {
		in.Category = "general"
	}
	if err := oneOf("category", in.Category, "improvement", "correction", "context", "general"); err != nil {
		return err
	}
	mid, cid, err := a.message(c)
	if err != nil {
		return err
	}
	user := auth.UserOf(c)
	note := &protocol.UserNote{ID: protocol.NewID("an"), MessageID: mid, Content: in.Content,
		Category: protocol.UserNoteCategory(in.Category), Action: protocol.UserNoteActionCreate, Timestamp: time.Now().UnixMilli()}
	if err := a.write(c, asClient(user, protocol.New(cid, note))); err != nil {
		return err
	}
	ref, err := a.Store.Note(c.Request().Context(), user, note.ID)
	if err != nil {
		return lookup(err, "note")
	}
	return c.JSON(http.StatusCreated, ref.Note)
}

func (a *API) deleteNote(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	user := auth.UserOf(c)
	ref, err := a.Store.Note(c.Request().Context(), user, id)
	if err != nil {
		return lookup(err, "note")
	}
	note := &protocol.UserNote{ID: ref.ID, MessageID: ref.MessageID, Content: ref.Content,
		Category: protocol.UserNoteCategory(ref.Category), Action: protocol.UserNoteActionDelete, Timestamp: time.Now().UnixMilli()}
	if err := a.write(c, asClient(user, protocol.New(ref.ConversationID, note))); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

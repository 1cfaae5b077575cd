package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// createConversation: a Configuration envelope creates the row owned by the
// key's user (as a WebSocket client's first Configuration does), then a
// ConversationUpdate sets the title: the person's, or with
// provisionalTitle a placeholder a generated title replaces.
func (a *API) createConversation(c echo.Context) error {
	var in restapi.ConversationCreate
	if err := bindJSON(c, &in, true); err != nil {
		return err
	}
	if in.Title != nil {
		if err := text("title", *in.Title, maxTitle, false); err != nil {
			return err
		}
	}
	user, cid := auth.UserOf(c), protocol.NewID("ac")
	if err := a.admitConversation(c, cid); err != nil {
		return err
	}
	pubs := []publication{asClient(user, protocol.New(cid, &protocol.Configuration{ConversationID: &cid}))}
	if in.Title != nil && *in.Title != "" {
		env := protocol.New(cid, &protocol.ConversationUpdate{ConversationID: cid, Title: in.Title, UpdatedAt: time.Now().UnixMilli()})
		if in.ProvisionalTitle != nil && *in.ProvisionalTitle {
			// A placeholder: the title generated after the first answer
			// replaces it (persistence, migrations 00014).
			env.Meta = map[string]any{protocol.MetaTitleSource: protocol.TitleProvisional}
		}
		pubs = append(pubs, asServer(env))
	}
	if err := a.write(c, pubs...); err != nil {
		return err
	}
	conv, err := a.Store.Conversation(c.Request().Context(), user, cid)
	if err != nil {
		return lookup(err, "conversation")
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/conversations/"+cid)
	return c.JSON(http.StatusCreated, conv.Conversation)
}

func (a *API) listConversations(c echo.Context) error {
	statuses := []string{"active"}
	switch s := c.QueryParam("status"); s {
	case "", "active":
	case "archived":
		statuses = []string{"archived"}
	case "all":
		statuses = []string{"active", "archived"}
	default:
		return fail(http.StatusBadRequest, "status %q is not one of active, archived, all", s)
	}
	limit, err := limitParam(c, defaultLimit, maxLimit)
	if err != nil {
		return err
	}
	after, err := store.DecodeCursor(c.QueryParam("cursor"))
	if err != nil {
		return fail(http.StatusBadRequest, "cursor is not one this server handed out")
	}
	q := c.QueryParam("q")
	if err := text("q", q, maxTitle, false); err != nil {
		return err
	}
	convs, next, err := a.Store.Conversations(c.Request().Context(), store.ListConversations{
		User: auth.UserOf(c), Statuses: statuses, Title: q, Limit: limit, After: after})
	if err != nil {
		return err
	}
	page := restapi.ConversationPage{Conversations: make([]restapi.Conversation, len(convs))}
	for i, cv := range convs {
		page.Conversations[i] = cv.Conversation
	}
	if next != nil {
		page.NextCursor = next.Encode()
	}
	return c.JSON(http.StatusOK, page)
}

// conversation reads the path's conversation after the ownership check.
func (a *API) conversation(c echo.Context) (store.Conversation, error) {
	cid, err := pathID(c, "id")
	if err != nil {
		return store.Conversation{}, err
	}
	conv, err := a.Store.Conversation(c.Request().Context(), auth.UserOf(c), cid)
	if err != nil {
		return store.Conversation{}, lookup(err, "conversation")
	}
	return conv, nil
}

func (a *API) getConversation(c echo.Context) error {
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// The stream's position is read before the messages: a client that
	// resumes the conversation's envelopes after it misses nothing the
	// messages lack (and the stored sentences of an answer still streaming
	// let it continue that answer exactly).
	seq, err := a.streamSeq(ctx)
	if err != nil {
		return err
	}
	// Read what the stream holds up to there, the user's own last message
	// included (it may be on its way to Postgres still): the WebSocket
	// resumes after seq with the server's envelopes only. Bounded: when
	// persistence lags, the snapshot is served anyway.
	wctx, cancel := context.WithTimeout(ctx, snapshotWait)
	if err := rpc.WaitApplied(wctx, a.NC, bus.StreamConversations, seq); err != nil {
		a.Log.Warn().Err(err).Uint64("sequence", seq).Msg("conversation read before persistence applied the stream")
	}
	cancel()
	var msgs []store.Message
	if through := c.QueryParam("through"); through != "" {
		if len(through) > maxIDLen || !subjects.ValidToken(through) || !utf8.ValidString(through) {
			return fail(http.StatusBadRequest, "through %q is not a valid id", through)
		}
		msgs, err = a.Store.BranchThrough(ctx, conv.ID, through)
		if errors.Is(err, store.ErrNotFound) {
			return fail(http.StatusNotFound, "message %q is not in this conversation", through)
		}
	} else {
		msgs, err = a.Store.Branch(ctx, conv.ID)
	}
	if err != nil {
		return err
	}
	if err := a.Store.StreamingSentences(ctx, msgs); err != nil {
		return err
	}
	if err := a.Store.Feedback(ctx, auth.UserOf(c), msgs); err != nil {
		return err
	}
	session, err := a.Store.LastVoiceSession(ctx, conv.ID)
	if err != nil {
		return err
	}
	comments, err := a.Store.Commentaries(ctx, conv.ID)
	if err != nil {
		return err
	}
	eff, err := a.effective(ctx, conv.ID)
	if err != nil {
		return err
	}
	// StreamSeq is read before the messages: a WebSocket resuming with
	// lastSequenceSeen = -StreamSeq gets every server envelope the snapshot
	// may lack.
	return c.JSON(http.StatusOK, restapi.ConversationWithMessages{ID: conv.ID, Title: conv.Title, Status: conv.Status,
		CreatedAt: conv.CreatedAt, UpdatedAt: conv.UpdatedAt, MessageCount: conv.MessageCount, TipMessageID: conv.TipMessageID,
		LastClientStanzaID: conv.LastClientStanzaID, Messages: msgs, StreamSeq: seq, LastVoiceSession: session, Preferences: &eff, Commentaries: comments})
}

// snapshotWait bounds how long a conversation read waits for persistence
// to apply the stream up to the read's position.
const snapshotWait = 2 * time.Second

// streamSeq is the CONVERSATIONS stream's last sequence.
func (a *API) streamSeq(ctx context.Context) (uint64, error) {
	js, err := jetstream.New(a.NC)
	if err != nil {
		return 0, fail(http.StatusServiceUnavailable, "message bus unavailable")
	}
	st, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		a.Log.Warn().Err(err).Msg("conversation stream info")
		return 0, fail(http.StatusServiceUnavailable, "message bus unavailable")
	}
	return st.CachedInfo().State.LastSeq, nil
}

// patchConversation renames or archives (or un-archives) through a
// ConversationUpdate, which the conversation's connected clients also get.
func (a *API) patchConversation(c echo.Context) error {
	var in restapi.ConversationPatch
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.Title == nil && in.Status == nil {
		return fail(http.StatusBadRequest, "give a title, a status or both")
	}
	if in.Title != nil {
		if err := text("title", *in.Title, maxTitle, false); err != nil {
			return err
		}
	}
	if in.Status != nil {
		if err := oneOf("status", *in.Status, "active", "archived"); err != nil {
			return err
		}
	}
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	upd := &protocol.ConversationUpdate{ConversationID: conv.ID, Title: in.Title, Status: in.Status, UpdatedAt: time.Now().UnixMilli()}
	if err := a.write(c, asServer(protocol.New(conv.ID, upd))); err != nil {
		return err
	}
	conv, err = a.Store.Conversation(c.Request().Context(), auth.UserOf(c), conv.ID)
	if err != nil {
		return lookup(err, "conversation")
	}
	return c.JSON(http.StatusOK, conv.Conversation)
}

// deleteConversation soft-deletes: status deleted (persistence sets
// deleted_at). Once applied, every replica closes its connections to the
// conversation (WebSockets bound to it, its timeline streams) and its
// LiveKit room is deleted, the room-agent's participation with it: a
// deleted conversation is no longer found, so none opens again.
func (a *API) deleteConversation(c echo.Context) error {
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	upd := &protocol.ConversationUpdate{ConversationID: conv.ID, Status: protocol.Ptr("deleted"), UpdatedAt: time.Now().UnixMilli()}
	if err := a.write(c, asServer(protocol.New(conv.ID, upd))); err != nil {
		return err
	}
	log := a.Log.With().Str("conversation_id", conv.ID).Logger()
	if err := conns.Publish(a.NC, conns.Revocation{Conversation: conv.ID}); err != nil {
		// This replica's own connections end all the same.
		log.Warn().Err(err).Msg("tell the other replicas of a deleted conversation; their connections to it stay open until they close")
		a.EndConversation(conv.ID)
	}
	if a.Rooms != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), a.WriteTimeout)
		defer cancel()
		if err := a.Rooms.EndConversation(ctx, conv.ID); err != nil {
			log.Warn().Err(err).Msg("delete the LiveKit room of a deleted conversation; its participants stay until they leave")
		}
	}
	return c.NoContent(http.StatusNoContent)
}

// siblings lists the alternatives at a branch point: the messages sharing
// the path message's parent.
func (a *API) siblings(c echo.Context) error {
	mid, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := a.Store.MessageConversation(ctx, auth.UserOf(c), mid); err != nil {
		return lookup(err, "message")
	}
	parent, sibs, current, err := a.Store.Siblings(ctx, mid)
	if errors.Is(err, store.ErrNotFound) {
		return lookup(err, "message")
	}
	if err != nil {
		return err
	}
	if err := a.Store.Feedback(ctx, auth.UserOf(c), sibs); err != nil {
		return err
	}
	out := restapi.Siblings{ParentID: parent, Siblings: sibs}
	if current != "" {
		out.CurrentID = &current
	}
	return c.JSON(http.StatusOK, out)
}

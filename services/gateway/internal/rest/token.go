package rest

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/livekit"
)

// AgentRequester asks for a room-agent in a conversation's room; false
// means one was already asked for (or is in the room).
type AgentRequester interface {
	Request(ctx context.Context, cid, user string, now time.Time) (bool, error)
}

// conversationToken hands the owner a LiveKit token for the conversation's
// room and asks for an agent to join it.
func (a *API) conversationToken(c echo.Context) error {
	if a.LiveKit == nil {
		return fail(http.StatusServiceUnavailable, "voice is off: LiveKit is not configured on this server (set ALICIA_LIVEKIT_URL, ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET)")
	}
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	user, now := auth.UserOf(c), time.Now()
	grant, err := a.LiveKit.Issue(conv.ID, user, now)
	if err != nil {
		return err
	}
	if a.LiveKitSameOrigin {
		grant.URL = livekit.SameOriginURL(c.Request(), c.Scheme())
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), a.WriteTimeout)
	defer cancel()
	asked, err := a.Agents.Request(ctx, conv.ID, user, now)
	if errors.Is(err, livekit.ErrTooManyRooms) {
		return fail(http.StatusTooManyRequests, "too many voice rooms open for this user; leave one first (%v)", err)
	}
	if err != nil {
		a.Log.Error().Err(err).Str("conversation_id", conv.ID).Msg("agent dispatch")
		return fail(http.StatusServiceUnavailable, "the message bus did not take the request for an agent; try again")
	}
	a.Log.Debug().Str("conversation_id", conv.ID).Bool("dispatched", asked).Msg("room token")
	return c.JSON(http.StatusOK, grant)
}

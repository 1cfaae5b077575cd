package rest

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/livekit"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// AgentRequester asks for a room-agent in a conversation's room; false
// means one was already asked for (or is in the room).
type AgentRequester interface {
	Request(ctx context.Context, cid, user string, now time.Time) (bool, error)
}

// RoomEnder ends LiveKit participation (livekit.Rooms): a deleted
// conversation's room, the participants a revoked session let in.
type RoomEnder interface {
	EndConversation(ctx context.Context, cid string) error
	EndPrincipal(ctx context.Context, principal string) (int, error)
}

// Principal is what a LiveKit token is issued to (livekit.PrincipalTag):
// the request's session, or its key (by fingerprint) when an API key
// authenticated it.
func Principal(c echo.Context) string {
	if id, _, ok := auth.SessionOf(c); ok {
		return SessionPrincipal(session.KeyOf(id))
	}
	return KeyPrincipal(auth.KeyOf(c))
}

// KeyPrincipal is the principal of the API key with fingerprint fp: removing
// that key removes the participants it let in, not those of the user's
// other keys.
func KeyPrincipal(fp string) string { return "key:" + fp }

// SessionPrincipal is the principal of the session of bucket key key.
func SessionPrincipal(key string) string { return "session:" + key }

// conversationToken (POST) hands the owner a LiveKit token for the
// conversation's room and asks for an agent to join it: a POST, since it
// changes state (the dispatch), and a cookie's request needs an allowed
// Origin for it. Every call signs a new token: the client asks again to
// join again.
func (a *API) conversationToken(c echo.Context) error {
	if a.LiveKit == nil {
		return fail(http.StatusServiceUnavailable, "voice is off: LiveKit is not configured on this server (set ALICIA_LIVEKIT_URL, ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET)")
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	if a.Accounts != nil {
		// Voice stores input audio: a user over the day's audio or the
		// stored budget is not let into a room (nor back in, as the
		// short-lived token is renewed).
		if o := a.Accounts.Voice(auth.UserOf(c)); o != nil {
			return a.overBudget(c, o)
		}
	}
	user, now := auth.UserOf(c), time.Now()
	grant, err := a.LiveKit.Issue(conv.ID, user, Principal(c), now)
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

// conversationTokenByGet answers the GET a client of an earlier version
// sends: a token asks for an agent, which a GET must not do.
func (a *API) conversationTokenByGet(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderAllow, http.MethodPost)
	return fail(http.StatusMethodNotAllowed, "ask for a room token with POST (it asks for an agent to join the room)")
}

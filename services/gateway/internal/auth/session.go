package auth

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// withSession authenticates a request by its session cookie. The session
// must exist (not signed out nor expired) and its API key must still be
// configured for the same user; a stale cookie is cleared with the 401. A
// cookie that names no session does not count as a failed authentication,
// and no failure budget refuses a valid one: a session id is 256 random
// bits, guessing one is hopeless, and a browser whose session expired
// would otherwise lock its address out.
//
// Then the Origin: a browser sends the cookie with any request to this
// host, so what a page of another origin could make it send must not act.
// A request that changes state (POST, PUT, PATCH, DELETE) and a WebSocket
// upgrade must carry an allowed Origin (Origins); any other request may
// carry none, but not a foreign one.
func (k *Keys) withSession(c echo.Context, next echo.HandlerFunc, id string) error {
	r := c.Request()
	rec, err := k.Sessions.Lookup(r.Context(), id)
	if errors.Is(err, session.ErrNotFound) {
		k.Cookie.Clear(c.Response(), r)
		return echo.NewHTTPError(http.StatusUnauthorized, "the session expired or was signed out; sign in again (POST /v1/session)")
	}
	if err != nil {
		k.Log.Warn().Err(err).Msg("session lookup")
		return echo.NewHTTPError(http.StatusServiceUnavailable, "sessions are unavailable; try again")
	}
	if user, ok := k.KeyUser(rec.KeyFingerprint); !ok || user != rec.User {
		k.Cookie.Clear(c.Response(), r)
		return echo.NewHTTPError(http.StatusUnauthorized, "the API key this session was opened with is no longer valid; sign in again")
	}
	if err := k.checkOrigin(c); err != nil {
		return err
	}
	if k.Failures != nil {
		// Its key may sign in again from here even while someone else
		// behind the address is guessing keys.
		k.Failures.Remember(c.RealIP(), rec.KeyFingerprint)
	}
	c.Set(userKey, rec.User)
	c.Set(adminKey, k.IsAdminUser(rec.User))
	c.Set(apiKeyKey, rec.KeyFingerprint)
	c.Set(sessionKey, sessionOf{id: id, rec: rec})
	return next(c)
}

// checkOrigin is withSession's Origin rule.
func (k *Keys) checkOrigin(c echo.Context) error {
	r := c.Request()
	origin := r.Header.Get(echo.HeaderOrigin)
	if origin == "" {
		if ChangesState(r.Method) || c.IsWebSocket() {
			return echo.NewHTTPError(http.StatusForbidden,
				"a request with the session cookie that changes something, or opens the WebSocket, must carry an Origin header")
		}
		return nil
	}
	if err := k.Origins.Check(r, origin); err != nil {
		return echo.NewHTTPError(http.StatusForbidden, err.Error())
	}
	return nil
}

// ChangesState reports whether method is one that writes (POST, PUT, PATCH,
// DELETE): those need an allowed Origin with a cookie.
func ChangesState(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

type sessionOf struct {
	id  string
	rec session.Record
}

// SessionOf returns the session that authenticated the request and its id,
// or false when a key did (or nothing did).
func SessionOf(c echo.Context) (id string, rec session.Record, ok bool) {
	s, ok := c.Get(sessionKey).(sessionOf)
	return s.id, s.rec, ok
}

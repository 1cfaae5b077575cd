package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// Sessions serves /v1/session: a browser trades an API key for a session
// cookie (POST), reads its session (GET) and signs out (DELETE). The key
// itself never reaches the browser's storage or a URL.
type Sessions struct {
	Keys   *auth.Keys
	Store  SessionStore
	Cookie session.Cookie
	Log    zerolog.Logger
}

// SessionStore opens and ends sessions (session.Store).
type SessionStore interface {
	Create(ctx context.Context, user, keyFingerprint string) (string, session.Record, error)
	Revoke(ctx context.Context, id string) error
	TTL() time.Duration
}

// Register adds POST /v1/session to e, outside the authenticated group
// (its body is the credential; mw limit it), and GET and DELETE to the
// authenticated group g.
func (s *Sessions) Register(e *echo.Echo, g *echo.Group, mw ...echo.MiddlewareFunc) {
	e.POST("/v1/session", s.create, mw...)
	g.GET("/session", s.get)
	g.DELETE("/session", s.delete)
}

// create checks the key as the authentication middleware does
// (auth.Keys.Authenticate: a wrong key counts as a failed authentication,
// an empty one does not) and, when it is valid, opens a session and sets
// its cookie. A browser's request must come from an allowed origin; one
// without Origin (a script) may.
func (s *Sessions) create(c echo.Context) error {
	r := c.Request()
	c.Response().Header().Set("Cache-Control", "no-store")
	if origin := r.Header.Get(echo.HeaderOrigin); origin != "" {
		if err := s.Keys.Origins.Check(r, origin); err != nil {
			return fail(http.StatusForbidden, "%s", err.Error())
		}
	}
	var in restapi.SessionRequest
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.APIKey == "" {
		return fail(http.StatusUnauthorized, "apiKey is empty")
	}
	user, err := s.Keys.Authenticate(c, in.APIKey)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// Signing in again ends the session the browser had.
	if old, ok := s.Cookie.Read(r); ok {
		if err := s.Store.Revoke(ctx, old); err != nil {
			s.Log.Warn().Err(err).Msg("revoke the previous session")
		}
	}
	id, rec, err := s.Store.Create(ctx, user, auth.Fingerprint(in.APIKey))
	if err != nil {
		s.Log.Error().Err(err).Msg("open a session")
		return fail(http.StatusServiceUnavailable, "sessions are unavailable; try again")
	}
	s.Cookie.Set(c.Response(), r, id, s.Store.TTL())
	return c.JSON(http.StatusCreated, restapi.Session{User: rec.User, Admin: s.Keys.IsAdminUser(rec.User), ExpiresAt: rec.ExpiresAt})
}

// get answers the cookie's session; a request authenticated by a key has
// none (401).
func (s *Sessions) get(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	_, rec, ok := auth.SessionOf(c)
	if !ok {
		return fail(http.StatusUnauthorized, "no session: this request carries an API key, not a session cookie")
	}
	return c.JSON(http.StatusOK, restapi.Session{User: rec.User, Admin: auth.IsAdmin(c), ExpiresAt: rec.ExpiresAt})
}

// delete signs out: the session ends on every replica, and the browser is
// told to drop the cookie.
func (s *Sessions) delete(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	id, _, ok := auth.SessionOf(c)
	if !ok {
		return fail(http.StatusUnauthorized, "no session: this request carries an API key, not a session cookie")
	}
	if err := s.Store.Revoke(c.Request().Context(), id); err != nil {
		s.Log.Error().Err(err).Msg("revoke a session")
		return fail(http.StatusServiceUnavailable, "sessions are unavailable; try again")
	}
	s.Cookie.Clear(c.Response(), c.Request())
	return c.NoContent(http.StatusNoContent)
}

package session

import (
	"net/http"
	"time"
)

// CookieName is the session cookie.
const CookieName = "alicia_session"

// Cookie writes the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it), Path=/, and Secure
// when the request came over TLS or Secure is set (ALICIA_COOKIE_SECURE,
// behind a TLS proxy).
type Cookie struct {
	Secure bool
}

func (c Cookie) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Secure || r.TLS != nil}
}

// Set gives the browser the session id for ttl.
func (c Cookie) Set(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	http.SetCookie(w, c.cookie(r, id, max(1, int(ttl/time.Second))))
}

// Clear tells the browser to drop the cookie.
func (c Cookie) Clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, c.cookie(r, "", -1))
}

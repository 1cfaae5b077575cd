package session

import (
	"net/http"
	"time"
)

// CookieName is the session cookie over plain HTTP (loopback `alicia up`).
const CookieName = "alicia_session"

// SecureCookieName is the session cookie when it is Secure: the __Host-
// prefix makes a browser take it only with Secure, Path=/ and no Domain,
// so neither a sibling host nor a plain-HTTP answer can plant or
// overwrite it.
const SecureCookieName = "__Host-" + CookieName

// Cookie writes the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it), Path=/, and Secure,
// named SecureCookieName, when the request came over TLS or Secure is set
// (ALICIA_COOKIE_SECURE, behind a TLS proxy).
type Cookie struct {
	Secure bool
}

// secure reports whether r's cookie is Secure.
func (c Cookie) secure(r *http.Request) bool { return c.Secure || r.TLS != nil }

// Name is the session cookie's name for r.
func (c Cookie) Name(r *http.Request) string {
	if c.secure(r) {
		return SecureCookieName
	}
	return CookieName
}

func (c Cookie) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: c.Name(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)}
}

// Set gives the browser the session id for ttl.
func (c Cookie) Set(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	http.SetCookie(w, c.cookie(r, id, max(1, int(ttl/time.Second))))
}

// Clear tells the browser to drop the cookie, under both names: one set
// before the gateway went behind TLS (or before this name) goes too.
func (c Cookie) Clear(w http.ResponseWriter, r *http.Request) {
	plain := c.cookie(r, "", -1)
	plain.Name = CookieName
	http.SetCookie(w, plain)
	http.SetCookie(w, &http.Cookie{Name: SecureCookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: true})
}

// Read returns the session id r carries, or false. The __Host- cookie
// comes first; the plain name is read only where the cookie is not Secure:
// on a Secure request it could have been planted by a sibling host or a
// plain-HTTP answer (session fixation), which is what the prefix rules out.
func (c Cookie) Read(r *http.Request) (string, bool) {
	if ck, err := r.Cookie(SecureCookieName); err == nil && ck.Value != "" {
		return ck.Value, true
	}
	if c.secure(r) {
		return "", false
	}
	if ck, err := r.Cookie(CookieName); err == nil && ck.Value != "" {
		return ck.Value, true
	}
	return "", false
}

package session_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

func TestCookie(t *testing.T) {
	for _, c := range []struct {
		name   string
		cookie session.Cookie
		tls    bool
		secure bool
	}{
		{"plain HTTP", session.Cookie{}, false, false},
		{"TLS", session.Cookie{}, true, true},
		{"behind a TLS proxy", session.Cookie{Secure: true}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/session", nil)
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			name := "alicia_session"
			if c.secure {
				name = "__Host-alicia_session"
			}
			w := httptest.NewRecorder()
			c.cookie.Set(w, r, "the-id", 7*24*time.Hour)
			set := w.Header().Get("Set-Cookie")
			for _, attr := range []string{name + "=the-id", "Path=/", "Max-Age=604800", "HttpOnly", "SameSite=Strict"} {
				if !strings.Contains(set, attr) {
					t.Errorf("Set-Cookie %q lacks %s", set, attr)
				}
			}
			if !strings.HasPrefix(set, name+"=") || strings.Contains(set, "Domain") {
				t.Errorf("Set-Cookie %q, want %s and no Domain", set, name)
			}
			if strings.Contains(set, "Secure") != c.secure {
				t.Errorf("Set-Cookie %q, want Secure %v", set, c.secure)
			}
			w = httptest.NewRecorder()
			c.cookie.Clear(w, r)
			cleared := map[string]bool{}
			for _, set := range w.Header().Values("Set-Cookie") {
				n, _, _ := strings.Cut(set, "=")
				cleared[n] = strings.Contains(set, n+"=;") && strings.Contains(set, "Max-Age=0") && strings.Contains(set, "Path=/")
				if n == "__Host-alicia_session" && !strings.Contains(set, "Secure") {
					t.Errorf("clearing Set-Cookie %q without Secure: a browser ignores it", set)
				}
				if n == "alicia_session" && strings.Contains(set, "Secure") != c.secure {
					t.Errorf("clearing Set-Cookie %q, want Secure %v", set, c.secure)
				}
			}
			if !cleared["alicia_session"] || !cleared["__Host-alicia_session"] {
				t.Errorf("clearing Set-Cookie %q, want both names dropped", w.Header().Values("Set-Cookie"))
			}
		})
	}
}

// TestCookieRead: the session id comes from the __Host- cookie first; the
// plain name only where the cookie is not Secure (over TLS it could have
// been planted by a sibling host).
func TestCookieRead(t *testing.T) {
	for _, c := range []struct {
		name    string
		cookie  session.Cookie
		tls     bool
		carries map[string]string
		want    string
	}{
		{"plain HTTP, plain name", session.Cookie{}, false, map[string]string{"alicia_session": "p"}, "p"},
		{"plain HTTP, nothing", session.Cookie{}, false, nil, ""},
		{"TLS, __Host-", session.Cookie{}, true, map[string]string{"__Host-alicia_session": "h"}, "h"},
		{"TLS, both", session.Cookie{}, true, map[string]string{"alicia_session": "p", "__Host-alicia_session": "h"}, "h"},
		{"TLS, plain name only", session.Cookie{}, true, map[string]string{"alicia_session": "p"}, ""},
		{"TLS proxy, __Host-", session.Cookie{Secure: true}, false, map[string]string{"__Host-alicia_session": "h"}, "h"},
		{"TLS proxy, plain name only", session.Cookie{Secure: true}, false, map[string]string{"alicia_session": "p"}, ""},
		{"plain HTTP, __Host- (a browser on localhost)", session.Cookie{}, false, map[string]string{"__Host-alicia_session": "h"}, "h"},
		{"empty value", session.Cookie{}, false, map[string]string{"alicia_session": ""}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/session", nil)
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for n, v := range c.carries {
				r.AddCookie(&http.Cookie{Name: n, Value: v})
			}
			got, ok := c.cookie.Read(r)
			if got != c.want || ok != (c.want != "") {
				t.Fatalf("Read = %q %v, want %q", got, ok, c.want)
			}
		})
	}
}

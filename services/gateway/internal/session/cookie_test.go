package session_test

import (
	"crypto/tls"
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
			w := httptest.NewRecorder()
			c.cookie.Set(w, r, "the-id", 7*24*time.Hour)
			set := w.Header().Get("Set-Cookie")
			for _, attr := range []string{"alicia_session=the-id", "Path=/", "Max-Age=604800", "HttpOnly", "SameSite=Strict"} {
				if !strings.Contains(set, attr) {
					t.Errorf("Set-Cookie %q lacks %s", set, attr)
				}
			}
			if strings.Contains(set, "Secure") != c.secure {
				t.Errorf("Set-Cookie %q, want Secure %v", set, c.secure)
			}
			w = httptest.NewRecorder()
			c.cookie.Clear(w, r)
			if set := w.Header().Get("Set-Cookie"); !strings.Contains(set, "alicia_session=;") || !strings.Contains(set, "Max-Age=0") ||
				strings.Contains(set, "Secure") != c.secure {
				t.Errorf("clearing Set-Cookie %q", set)
			}
		})
	}
}

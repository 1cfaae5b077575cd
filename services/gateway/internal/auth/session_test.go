package auth_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

func TestOrigins(t *testing.T) {
	for _, c := range []struct {
		name    string
		o       auth.Origins
		host    string
		tls     bool
		origin  string
		allowed bool
	}{
		{"own", auth.Origins{}, "alicia.local:8080", false, "http://alicia.local:8080", true},
		{"own, case", auth.Origins{}, "Alicia.Local:8080", false, "http://ALICIA.local:8080", true},
		{"own, default port in Origin", auth.Origins{}, "alicia.local", false, "http://alicia.local:80", true},
		{"own, default port in Host", auth.Origins{}, "alicia.local:443", true, "https://alicia.local", true},
		{"own, trailing slash", auth.Origins{}, "alicia.local", false, "http://alicia.local/", true},
		{"own IPv6", auth.Origins{}, "[::1]:8080", false, "http://[::1]:8080", true},
		{"own IPv6, default port", auth.Origins{}, "[::1]", false, "http://[::1]:80", true},
		{"own over TLS", auth.Origins{}, "alicia.local", true, "https://alicia.local", true},
		{"plain origin on TLS", auth.Origins{}, "alicia.local", true, "http://alicia.local", false},
		{"https origin on plain HTTP", auth.Origins{}, "alicia.local", false, "https://alicia.local", false},
		{"behind a TLS proxy", auth.Origins{Secure: true}, "alicia.example.com", false, "https://alicia.example.com", true},
		{"behind a TLS proxy, plain origin", auth.Origins{Secure: true}, "alicia.example.com", false, "http://alicia.example.com", false},
		{"other port", auth.Origins{}, "alicia.local:8080", false, "http://alicia.local:8081", false},
		{"other host", auth.Origins{}, "alicia.local", false, "http://evil.example", false},
		{"suffix trick", auth.Origins{}, "alicia.local", false, "http://alicia.local.evil.example", false},
		{"null", auth.Origins{}, "alicia.local", false, "null", false},
		{"not a URL", auth.Origins{}, "alicia.local", false, "::", false},
		{"with a path", auth.Origins{}, "alicia.local", false, "http://alicia.local/x", false},
		{"with userinfo", auth.Origins{}, "alicia.local", false, "http://u@alicia.local", false},
		{"file", auth.Origins{}, "alicia.local", false, "file://alicia.local", false},
		{"host pattern, any scheme", auth.Origins{Patterns: []string{"app.example.com"}}, "alicia.local", false, "http://app.example.com", true},
		{"host pattern, https", auth.Origins{Patterns: []string{"app.example.com"}}, "alicia.local", false, "https://app.example.com", true},
		{"host pattern, port", auth.Origins{Patterns: []string{"app.example.com"}}, "alicia.local", false, "https://app.example.com:8443", false},
		{"wildcard", auth.Origins{Patterns: []string{"*.example.com"}}, "alicia.local", false, "https://app.EXAMPLE.com", true},
		{"wildcard, apex", auth.Origins{Patterns: []string{"*.example.com"}}, "alicia.local", false, "https://example.com", false},
		{"origin pattern", auth.Origins{Patterns: []string{"https://app.example.com"}}, "alicia.local", false, "https://app.example.com", true},
		{"origin pattern, other scheme", auth.Origins{Patterns: []string{"https://app.example.com"}}, "alicia.local", false, "http://app.example.com", false},
		{"origin pattern, case", auth.Origins{Patterns: []string{"HTTPS://App.Example.com"}}, "alicia.local", false, "https://app.example.com", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://"+c.host+"/v1/x", nil)
			r.Host = c.host
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			err := c.o.Check(r, c.origin)
			if (err == nil) != c.allowed {
				t.Fatalf("Check(%q) on %s = %v, want allowed %v", c.origin, c.host, err, c.allowed)
			}
		})
	}
	if err := auth.ValidatePatterns([]string{"app.example.com", "*.lan", "https://x"}); err != nil {
		t.Fatal(err)
	}
	if err := auth.ValidatePatterns([]string{"[oops"}); err == nil {
		t.Fatal("a bad pattern passed")
	}
}

// sessions is a fake SessionFinder.
type sessions struct {
	recs map[string]session.Record
	err  error
}

func (s sessions) Lookup(_ context.Context, id string) (session.Record, error) {
	if s.err != nil {
		return session.Record{}, s.err
	}
	r, ok := s.recs[id]
	if !ok {
		return session.Record{}, session.ErrNotFound
	}
	return r, nil
}

func TestMiddlewareSessions(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa,bob:bbbbbbbbbbbbbbbbbbbb")
	k := auth.NewKeys(keys, map[string]bool{"alice": true})
	k.QueryTokenPath = "/ws"
	k.Failures = auth.NewFailureLimiter(auth.FailureLimits{PerMinute: 1, Burst: 1, AddressPerMinute: 1, AddressBurst: 1, Tracked: 10})
	fp := auth.Fingerprint("aaaaaaaaaaaaaaaaaaaa")
	if u, ok := k.KeyUser(fp); !ok || u != "alice" || fp == auth.Fingerprint("bbbbbbbbbbbbbbbbbbbb") || strings.Contains(fp, "aaaa") {
		t.Fatalf("fingerprint %s: %q %v", fp, u, ok)
	}
	k.Sessions = sessions{recs: map[string]session.Record{
		"s-alice":   {User: "alice", KeyFingerprint: fp, ExpiresAt: 1},
		"s-removed": {User: "alice", KeyFingerprint: auth.Fingerprint("removed-key-0123456789")},
		"s-moved":   {User: "carol", KeyFingerprint: fp},
	}}
	e := echo.New()
	who := func(c echo.Context) error {
		id, _, ok := auth.SessionOf(c)
		return c.String(http.StatusOK, auth.UserOf(c)+" session="+id+map[bool]string{true: " ok", false: ""}[ok])
	}
	e.GET("/x", who, k.Middleware())
	e.POST("/x", who, k.Middleware())
	e.GET("/ws", who, k.Middleware())
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		status             int
		body               string
		cleared            bool
	}{
		{"cookie", "GET", "/x", map[string]string{"Cookie": "alicia_session=s-alice"}, 200, "alice session=s-alice ok", false},
		{"cookie, write from own origin", "POST", "/x", map[string]string{"Cookie": "alicia_session=s-alice", "Origin": "http://example.com"}, 200, "alice session=s-alice ok", false},
		{"cookie, write without Origin", "POST", "/x", map[string]string{"Cookie": "alicia_session=s-alice"}, 403, "", false},
		{"cookie, upgrade without Origin", "GET", "/ws", map[string]string{"Cookie": "alicia_session=s-alice", "Upgrade": "websocket", "Connection": "Upgrade"}, 403, "", false},
		{"cookie, upgrade from own origin", "GET", "/ws", map[string]string{"Cookie": "alicia_session=s-alice", "Upgrade": "websocket", "Connection": "Upgrade", "Origin": "http://example.com"}, 200, "alice session=s-alice ok", false},
		{"key wins over cookie", "GET", "/x", map[string]string{"Cookie": "alicia_session=s-alice", "Authorization": "Bearer bbbbbbbbbbbbbbbbbbbb"}, 200, "bob session=", false},
		{"query token wins over cookie", "GET", "/ws?token=bbbbbbbbbbbbbbbbbbbb", map[string]string{"Cookie": "alicia_session=s-alice", "Upgrade": "websocket", "Connection": "Upgrade"}, 200, "bob session=", false},
		{"unknown session", "GET", "/x", map[string]string{"Cookie": "alicia_session=s-nobody"}, 401, "", true},
		{"key removed", "GET", "/x", map[string]string{"Cookie": "alicia_session=s-removed"}, 401, "", true},
		{"key of another user now", "GET", "/x", map[string]string{"Cookie": "alicia_session=s-moved"}, 401, "", true},
		// Unknown sessions never use the failure budget (1 here): alice still gets in.
		{"after stale cookies", "GET", "/x", map[string]string{"Cookie": "alicia_session=s-alice"}, 200, "alice session=s-alice ok", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			for h, v := range c.header {
				req.Header.Set(h, v)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != c.status || (c.body != "" && rec.Body.String() != c.body) {
				t.Fatalf("%d %q, want %d %q", rec.Code, rec.Body.String(), c.status, c.body)
			}
			cleared := strings.Contains(rec.Header().Get("Set-Cookie"), "alicia_session=;")
			if cleared != c.cleared {
				t.Fatalf("Set-Cookie %q, cleared want %v", rec.Header().Get("Set-Cookie"), c.cleared)
			}
		})
	}

	// The bucket unreachable: 503, and the cookie is kept.
	k.Sessions = sessions{err: errors.New("nats: timeout")}
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set("Cookie", "alicia_session=s-alice")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Set-Cookie") != "" {
		t.Fatalf("lookup failing: %d %v", rec.Code, rec.Header())
	}
}

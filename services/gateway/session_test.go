package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway"
)

type sessionJSON struct {
	User      string `json:"user"`
	Admin     bool   `json:"admin"`
	ExpiresAt int64  `json:"expiresAt"`
}

// replica runs another gateway on the stack's NATS and Postgres, with the
// stack's keys unless mod changes them, until stop (or the test's end).
func (s *stack) replica(t *testing.T, log io.Writer, mod func(*gateway.Config)) (base string, stop func()) {
	t.Helper()
	cfg := gateway.DefaultConfig()
	cfg.HTTPAddr, cfg.NATSURL, cfg.PostgresURL = "127.0.0.1:0", s.nc.ConnectedUrl(), s.pgURL
	cfg.APIKeys = "alice:" + aliceKey + ",bob:" + bobKey + ",root:" + adminKey
	cfg.AdminUsers, cfg.RateLimit = "root", 1000
	if mod != nil {
		mod(&cfg)
	}
	logger := zerolog.Nop()
	if log != nil {
		logger = zerolog.New(log).Level(zerolog.DebugLevel)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- gateway.Run(ctx, cfg, logger, func(a string) { addr <- a }) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("replica: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-addr:
		return "http://" + a, stop
	case err := <-done:
		t.Fatalf("replica: %v", err)
	}
	return "", stop
}

// browserCall sends a request as the web client's page would: the session
// cookie (when not empty: its value, or "name=value" for another name than
// alicia_session), an Origin (when not empty), no Authorization.
func browserCall(t *testing.T, base, cookie, origin, method, path string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			j, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			b = string(j)
		}
		rd = bytes.NewBufferString(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		if !strings.Contains(cookie, "alicia_session=") {
			cookie = "alicia_session=" + cookie
		}
		req.Header.Set("Cookie", cookie)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(t, req, method, path)
}

// signIn opens a session with key and returns the cookie's value and the answer.
func signIn(t *testing.T, base, key string) (string, sessionJSON) {
	t.Helper()
	var s sessionJSON
	r := browserCall(t, base, "", base, "POST", "/v1/session", map[string]string{"apiKey": key}).want(http.StatusCreated, &s)
	c := sessionCookie(t, r)
	if c == nil || c.Value == "" {
		t.Fatalf("no session cookie in %v", r.header)
	}
	return c.Value, s
}

func sessionCookie(t *testing.T, r reply) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "alicia_session" || c.Name == "__Host-alicia_session" {
			return c
		}
	}
	return nil
}

func TestSessionCookie(t *testing.T) {
	s := newStack(t)
	before := time.Now().Truncate(time.Millisecond)
	var got sessionJSON
	r := browserCall(t, s.base, "", s.base, "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, &got)
	if got.User != "alice" || got.Admin {
		t.Fatalf("session %+v", got)
	}
	if exp := time.UnixMilli(got.ExpiresAt); exp.Before(before.Add(7*24*time.Hour)) || exp.After(time.Now().Add(7*24*time.Hour)) {
		t.Fatalf("expiresAt %s, want in 7 days", exp)
	}
	c := sessionCookie(t, r)
	if c == nil || len(c.Value) != 43 || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 7*24*3600 || c.Secure {
		t.Fatalf("Set-Cookie %q", r.header.Values("Set-Cookie"))
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", r.header.Get("Cache-Control"))
	}
	cookie := c.Value

	// The cookie authenticates the API, reads without an Origin.
	var again sessionJSON
	browserCall(t, s.base, cookie, "", "GET", "/v1/session", nil).want(http.StatusOK, &again)
	if again != got {
		t.Fatalf("GET /v1/session %+v, want %+v", again, got)
	}
	browserCall(t, s.base, cookie, "", "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	var conv conversation
	browserCall(t, s.base, cookie, s.base, "POST", "/v1/conversations", map[string]any{"title": "From the browser"}).want(http.StatusCreated, &conv)
	var owner string
	if err := s.pool.QueryRow(t.Context(), `SELECT user_id FROM alicia_conversations WHERE id = $1`, conv.ID).Scan(&owner); err != nil || owner != "alice" {
		t.Fatalf("owner %q, %v", owner, err)
	}
	// The administrator's session says so.
	_, root := signIn(t, s.base, adminKey)
	if root.User != "root" || !root.Admin {
		t.Fatalf("root's session %+v", root)
	}
	// A key in Authorization is judged alone: GET /v1/session has no session to tell.
	s.call(t, aliceKey, "GET", "/v1/session", nil).wantError(http.StatusUnauthorized)

	// Sign out: 204, the cookie cleared, the session over.
	r = browserCall(t, s.base, cookie, s.base, "DELETE", "/v1/session", nil).want(http.StatusNoContent, nil)
	if c := sessionCookie(t, r); c == nil || c.MaxAge != -1 || c.Value != "" {
		t.Fatalf("sign out Set-Cookie %q", r.header.Values("Set-Cookie"))
	}
	for _, path := range []string{"/v1/session", "/v1/conversations"} {
		r := browserCall(t, s.base, cookie, "", "GET", path, nil)
		r.wantError(http.StatusUnauthorized)
		if c := sessionCookie(t, r); c == nil || c.MaxAge != -1 {
			t.Errorf("GET %s with a stale cookie does not clear it: %q", path, r.header.Values("Set-Cookie"))
		}
	}
	browserCall(t, s.base, cookie, s.base, "DELETE", "/v1/session", nil).wantError(http.StatusUnauthorized)
	// A made-up cookie is a 401 too.
	browserCall(t, s.base, strings.Repeat("A", 43), "", "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
	browserCall(t, s.base, "", "", "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
}

func TestSessionSignIn(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.AuthFailureBurst, c.AuthFailuresPerMinute = 3, 1 }
	})
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"unknown field", `{"apiKey": "` + aliceKey + `", "user": "root"}`, 400},
		{"two values", `{"apiKey": "` + aliceKey + `"} {}`, 400},
		{"wrong type", `{"apiKey": 1}`, 400},
		{"no body", ``, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := browserCall(t, s.base, "", s.base, "POST", "/v1/session", c.body)
			r.wantError(c.status)
			if sessionCookie(t, r) != nil {
				t.Fatalf("a cookie with %d", r.status)
			}
		})
	}
	// A foreign Origin: 403 even with the right key; none (a script): fine.
	browserCall(t, s.base, "", "http://evil.example", "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).wantError(http.StatusForbidden)
	browserCall(t, s.base, "", "", "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, nil)

	// A wrong key uses its own budget at the address (3 here), shared with
	// the API; an empty one is no key and uses none.
	for _, key := range []string{"wrong-key-0123456789", ""} {
		browserCall(t, s.base, "", s.base, "POST", "/v1/session", map[string]string{"apiKey": key}).wantError(http.StatusUnauthorized)
	}
	for range 2 {
		s.call(t, "wrong-key-0123456789", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	}
	r := browserCall(t, s.base, "", s.base, "POST", "/v1/session", map[string]string{"apiKey": "wrong-key-0123456789"})
	r.wantError(http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" || sessionCookie(t, r) != nil {
		t.Fatalf("429 headers %v", r.header)
	}
	// Another key's failures never refuse a valid key (issue 26).
	browserCall(t, s.base, "", s.base, "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, nil)
}

func TestSessionOrigin(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.AllowedOrigins = []string{"https://app.example.com", "*.lan:5173"} }
	})
	cookie, _ := signIn(t, s.base, aliceKey)
	var conv conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &conv)
	path := "/v1/conversations/" + conv.ID
	rename := map[string]any{"title": "renamed"}
	for _, c := range []struct {
		name, method, origin string
		status               int
	}{
		{"own origin", "PATCH", s.base, 200},
		{"allowed origin", "PATCH", "https://app.example.com", 200},
		{"allowed host pattern", "PATCH", "http://alicia.lan:5173", 200},
		{"host pattern, other port", "PATCH", "http://alicia.lan:5174", 403},
		{"no Origin", "PATCH", "", 403},
		{"foreign origin", "PATCH", "http://evil.example", 403},
		{"allowed host, other scheme", "PATCH", "http://app.example.com", 403},
		{"own host, other scheme", "PATCH", strings.Replace(s.base, "http://", "https://", 1), 403},
		{"own host, other port", "PATCH", "http://127.0.0.1:1", 403},
		{"null", "PATCH", "null", 403},
		{"read, no Origin", "GET", "", 200},
		{"read, own origin", "GET", s.base, 200},
		{"read, foreign origin", "GET", "http://evil.example", 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.method == "PATCH" {
				body = rename
			}
			r := browserCall(t, s.base, cookie, c.origin, c.method, path, body)
			if c.status != 200 {
				r.wantError(c.status)
				return
			}
			r.want(c.status, nil)
		})
	}
	// Every write route is guarded, not only PATCH.
	for _, w := range []struct{ method, path string }{{"POST", "/v1/conversations"}, {"DELETE", path}, {"POST", "/v1/memories"}, {"DELETE", "/v1/session"}} {
		browserCall(t, s.base, cookie, "http://evil.example", w.method, w.path, map[string]any{}).wantError(http.StatusForbidden)
	}
	browserCall(t, s.base, cookie, "", "GET", "/v1/session", nil).want(http.StatusOK, nil) // still signed in
	// A key without an Origin keeps working, and a key is not held to the cookie's rule.
	s.call(t, aliceKey, "PATCH", path, rename).want(http.StatusOK, nil)

	// The WebSocket: with the cookie, only from an allowed origin.
	wsURL := strings.Replace(s.base, "http", "ws", 1) + "/v1/ws"
	dial := func(origin string) (*websocket.Conn, int, error) {
		h := http.Header{"Cookie": {"alicia_session=" + cookie}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: h})
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return c, status, err
	}
	for _, origin := range []string{"http://evil.example", "", "http://app.example.com"} {
		if c, status, err := dial(origin); err == nil || status != http.StatusForbidden {
			if c != nil {
				c.CloseNow()
			}
			t.Errorf("WebSocket with the cookie from %q: %d, %v", origin, status, err)
		}
	}
	c, _, err := dial(s.base)
	if err != nil {
		t.Fatalf("WebSocket with the cookie from its own origin: %v", err)
	}
	defer c.CloseNow()
	w := &wsClient{t: t, c: c, next: 1}
	if w.info = w.recv(); w.info.Type != protocol.TypeServerInfo {
		t.Fatalf("first frame %+v", w.info)
	}
	w.send("", &protocol.Configuration{ConversationID: &conv.ID})
	if got := w.recv(); got.Type != protocol.TypeConfiguration {
		t.Fatalf("the cookie's user may not open her conversation: %+v", got)
	}
}

// TestSessionsAcrossReplicas: a session opened on one gateway works on
// another and after a restart; signing out on one ends it on all; a
// session whose key was removed is void.
func TestSessionsAcrossReplicas(t *testing.T) {
	s := newStack(t)
	a, stopA := s.replica(t, nil, nil)
	cookie, _ := signIn(t, a, aliceKey)
	b, _ := s.replica(t, nil, nil)
	browserCall(t, b, cookie, "", "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	browserCall(t, s.base, cookie, "", "GET", "/v1/session", nil).want(http.StatusOK, nil)

	// A restart: the session is in NATS, not in the process.
	stopA()
	a, _ = s.replica(t, nil, nil)
	browserCall(t, a, cookie, "", "GET", "/v1/session", nil).want(http.StatusOK, nil)

	// Alice's key removed: her sessions are void; bob's still work.
	bobCookie, _ := signIn(t, s.base, bobKey)
	rotated, _ := s.replica(t, nil, func(c *gateway.Config) { c.APIKeys = "alice:alice-new-key-0123456789,bob:" + bobKey })
	browserCall(t, rotated, cookie, "", "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
	browserCall(t, rotated, bobCookie, "", "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	// The same key now of another user: void too.
	moved, _ := s.replica(t, nil, func(c *gateway.Config) { c.APIKeys = "mallory:" + aliceKey })
	browserCall(t, moved, cookie, "", "GET", "/v1/session", nil).wantError(http.StatusUnauthorized)

	// Signing out on b ends the session on a and on the stack's gateway.
	browserCall(t, b, cookie, b, "DELETE", "/v1/session", nil).want(http.StatusNoContent, nil)
	for _, base := range []string{a, s.base} {
		browserCall(t, base, cookie, "", "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
	}
	// Signing in again with a cookie ends the old session.
	first, _ := signIn(t, s.base, bobKey)
	var r sessionJSON
	second := sessionCookie(t, browserCall(t, s.base, first, s.base, "POST", "/v1/session", map[string]string{"apiKey": bobKey}).want(http.StatusCreated, &r))
	browserCall(t, s.base, first, "", "GET", "/v1/session", nil).wantError(http.StatusUnauthorized)
	browserCall(t, s.base, second.Value, "", "GET", "/v1/session", nil).want(http.StatusOK, nil)
}

// TestSessionBehindTLSProxy: ALICIA_COOKIE_SECURE marks the cookie Secure,
// names it __Host-alicia_session (the plain name is not read then) and
// makes the gateway's own origin https.
func TestSessionBehindTLSProxy(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.gateway = func(c *gateway.Config) { c.CookieSecure = true } })
	public := strings.Replace(s.base, "http://", "https://", 1)
	r := browserCall(t, s.base, "", public, "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, nil)
	c := sessionCookie(t, r)
	if c == nil || c.Name != "__Host-alicia_session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
		t.Fatalf("Set-Cookie %q", r.header.Values("Set-Cookie"))
	}
	browserCall(t, s.base, "", s.base, "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).wantError(http.StatusForbidden)
	hostCookie := "__Host-alicia_session=" + c.Value
	browserCall(t, s.base, hostCookie, public, "POST", "/v1/conversations", nil).want(http.StatusCreated, nil)
	browserCall(t, s.base, hostCookie, s.base, "POST", "/v1/conversations", nil).wantError(http.StatusForbidden)
	// The plain name could have been planted by a sibling host: not read.
	browserCall(t, s.base, c.Value, public, "POST", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
	out := browserCall(t, s.base, hostCookie, public, "DELETE", "/v1/session", nil).want(http.StatusNoContent, nil)
	wantBothCleared(t, out.header)
	browserCall(t, s.base, hostCookie, public, "GET", "/v1/session", nil).wantError(http.StatusUnauthorized)
}

// TestSecretsStayOutOfLogs: neither an API key nor a session id appears in
// the gateway's log, at debug level, whatever the requests do (right and
// wrong keys, sessions, the WebSocket's query token, errors).
func TestSecretsStayOutOfLogs(t *testing.T) {
	s := newStack(t)
	var log testkit.SyncBuffer
	base, stop := s.replica(t, &log, nil)
	cookie, _ := signIn(t, base, aliceKey)
	browserCall(t, base, cookie, base, "POST", "/v1/conversations", nil).want(http.StatusCreated, nil)
	browserCall(t, base, cookie, "http://evil.example", "POST", "/v1/conversations", nil).wantError(http.StatusForbidden)
	browserCall(t, base, "", base, "POST", "/v1/session", map[string]string{"apiKey": bobKey + "x"}).wantError(http.StatusUnauthorized)
	browserCall(t, base, "", base, "POST", "/v1/session", `{"apiKey": "`+bobKey+`", "oops": 1}`).wantError(http.StatusBadRequest)
	bs := &stack{base: base}
	bs.call(t, "", "GET", "/v1/conversations?token="+adminKey, nil).wantError(http.StatusUnauthorized)
	bs.call(t, adminKey, "GET", "/v1/conversations/ac_nothing", nil).wantError(http.StatusNotFound)
	bs.call(t, "", "GET", "/v1/tools?token="+adminKey, nil).wantError(http.StatusUnauthorized)
	ws := bs.dial(t, bobKey)
	ws.send("", &protocol.Configuration{})
	ws.recv()
	ws.c.CloseNow()
	browserCall(t, base, cookie, base, "DELETE", "/v1/session", nil).want(http.StatusNoContent, nil)
	browserCall(t, base, cookie, "", "GET", "/v1/session", nil).wantError(http.StatusUnauthorized)
	stop()
	out := log.String()
	if !strings.Contains(out, "gateway listening") {
		t.Fatalf("the log is not captured: %q", out)
	}
	for name, secret := range map[string]string{"alice's key": aliceKey, "bob's key": bobKey, "root's key": adminKey, "the session id": cookie} {
		if strings.Contains(out, secret) {
			t.Errorf("the log shows %s: %s", name, out)
		}
	}
}

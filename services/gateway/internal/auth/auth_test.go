package auth_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

func TestParseKeys(t *testing.T) {
	keys, err := auth.ParseKeys(" alice:aaaaaaaaaaaaaaaaaaaa , bbbbbbbbbbbbbbbbbbbb")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].User != "alice" || keys[1].User == "" || keys[1].User == keys[0].User {
		t.Fatalf("keys = %+v", keys)
	}
	again, _ := auth.ParseKeys("bbbbbbbbbbbbbbbbbbbb")
	if again[0].User != keys[1].User {
		t.Fatal("the user of an anonymous key is not stable")
	}
	for _, bad := range []string{"", " , ", "short", "bob:short"} {
		if _, err := auth.ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}

func TestParseAdmins(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa,bob:bbbbbbbbbbbbbbbbbbbb")
	admins, unknown := auth.ParseAdmins(" alice , ", keys)
	if len(unknown) != 0 || !admins["alice"] || admins["bob"] {
		t.Fatalf("admins %v, unknown %v", admins, unknown)
	}
	if admins, unknown := auth.ParseAdmins("alice,carol", keys); len(unknown) != 1 || unknown[0] != "carol" || admins["carol"] {
		t.Fatalf("an administrator without a key: %v %v", admins, unknown)
	}
}

func TestMiddleware(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa,bob:bbbbbbbbbbbbbbbbbbbb")
	k := auth.NewKeys(keys, map[string]bool{"alice": true})
	k.QueryTokenPath = "/ws"
	e := echo.New()
	who := func(c echo.Context) error {
		return c.String(http.StatusOK, auth.UserOf(c)+" admin="+strconv.FormatBool(auth.IsAdmin(c)))
	}
	e.GET("/x", who, k.Middleware())
	e.GET("/ws", who, k.Middleware())
	e.PUT("/admin", who, k.Middleware(), auth.RequireAdmin)
	for _, c := range []struct {
		name, method, path, header string
		status                     int
		body                       string
	}{
		{"bearer", "GET", "/x", "Bearer aaaaaaaaaaaaaaaaaaaa", 200, "alice admin=true"},
		{"not an admin", "GET", "/x", "Bearer bbbbbbbbbbbbbbbbbbbb", 200, "bob admin=false"},
		{"token query on the WebSocket route", "GET", "/ws?token=bbbbbbbbbbbbbbbbbbbb", "", 200, "bob admin=false"},
		{"token query elsewhere", "GET", "/x?token=aaaaaaaaaaaaaaaaaaaa", "", 401, ""},
		{"wrong key", "GET", "/x", "Bearer aaaaaaaaaaaaaaaaaaab", 401, ""},
		{"no key", "GET", "/x", "", 401, ""},
		{"not bearer", "GET", "/x", "Basic aaaaaaaaaaaaaaaaaaaa", 401, ""},
		{"admin route, admin", "PUT", "/admin", "Bearer aaaaaaaaaaaaaaaaaaaa", 200, "alice admin=true"},
		{"admin route, user", "PUT", "/admin", "Bearer bbbbbbbbbbbbbbbbbbbb", 403, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != c.status || (c.body != "" && rec.Body.String() != c.body) {
				t.Fatalf("status %d body %q", rec.Code, rec.Body.String())
			}
		})
	}
}

func TestFailureLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := auth.NewFailureLimiter(6, 3, 2) // one failure back every 10 s
	l.SetClock(func() time.Time { return now })
	for range 3 {
		if _, ok := l.Blocked("192.0.2.1"); !ok {
			t.Fatal("blocked within the burst")
		}
		l.Fail("192.0.2.1")
	}
	wait, ok := l.Blocked("192.0.2.1")
	if ok || wait != 10 {
		t.Fatalf("after the burst: ok=%v wait=%d, want blocked for 10 s", ok, wait)
	}
	if _, ok := l.Blocked("192.0.2.2"); !ok {
		t.Fatal("another address is blocked")
	}
	// One IPv6 /64 is one client.
	for range 3 {
		l.Fail("2001:db8::1")
	}
	if _, ok := l.Blocked("2001:db8::2"); ok {
		t.Fatal("another address of the same /64 is not blocked")
	}
	now = now.Add(10 * time.Second)
	if _, ok := l.Blocked("192.0.2.1"); !ok {
		t.Fatal("still blocked after a refill")
	}
	// Bounded: at most 2 addresses are tracked.
	l.Fail("192.0.2.3")
	l.Fail("192.0.2.4")
	if n := l.Len(); n > 2 {
		t.Fatalf("%d addresses tracked, want at most 2", n)
	}
}

func TestMiddlewareThrottlesFailures(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa")
	k := auth.NewKeys(keys, nil)
	k.Failures = auth.NewFailureLimiter(1, 2, 100)
	e := echo.New()
	e.IPExtractor = echo.ExtractIPDirect()
	e.GET("/x", func(c echo.Context) error { return c.String(http.StatusOK, "ok") }, k.Middleware())
	do := func(remote, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/x", nil)
		req.RemoteAddr = remote + ":1234"
		req.Header.Set("X-Forwarded-For", "198.51.100.7") // not trusted
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	// Successful requests use no budget.
	for range 5 {
		if rec := do("192.0.2.1", "aaaaaaaaaaaaaaaaaaaa"); rec.Code != 200 {
			t.Fatalf("valid key: %d", rec.Code)
		}
	}
	for i := range 2 {
		if rec := do("192.0.2.1", "wrong-key-0123456789"); rec.Code != 401 {
			t.Fatalf("failure %d: %d, want 401", i, rec.Code)
		}
	}
	rec := do("192.0.2.1", "wrong-key-0123456789")
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("after the burst: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := do("192.0.2.2", "aaaaaaaaaaaaaaaaaaaa"); rec.Code != 200 {
		t.Fatalf("another address: %d", rec.Code)
	}
}

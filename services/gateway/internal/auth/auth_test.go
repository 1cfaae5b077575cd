package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
			if strings.HasPrefix(c.path, "/ws") { // ?token= is read on an upgrade only
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Connection", "Upgrade")
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
	// A key: 3 at once, one back every 10 s; an address: 5 at once, one
	// back every 20 s; 3 entries per table.
	l := auth.NewFailureLimiter(auth.FailureLimits{PerMinute: 6, Burst: 3, AddressPerMinute: 3, AddressBurst: 5, Tracked: 3})
	l.SetClock(func() time.Time { return now })
	for i := range 3 {
		if wait, blocked := l.Fail("192.0.2.1", "wrong-1"); blocked {
			t.Fatalf("failure %d blocked (%d s)", i, wait)
		}
	}
	if wait, blocked := l.Fail("192.0.2.1", "wrong-1"); !blocked || wait != 10 {
		t.Fatalf("after the key's burst: blocked %v, wait %d, want 10 s", blocked, wait)
	}
	// Another key from the address, and the same key from another address,
	// have budgets of their own.
	if _, blocked := l.Fail("192.0.2.1", "wrong-2"); blocked {
		t.Fatal("another key is blocked")
	}
	if _, blocked := l.Fail("192.0.2.2", "wrong-1"); blocked {
		t.Fatal("another address is blocked")
	}
	// A valid key is admitted, and remembered.
	if _, ok := l.Admit("192.0.2.1", "alice"); !ok {
		t.Fatal("a valid key refused")
	}
	l.Remember("192.0.2.1", "bob")
	// The address's ceiling: 5 failures of any keys (4 so far; the refused
	// one did not count).
	if _, blocked := l.Fail("192.0.2.1", "wrong-3"); blocked {
		t.Fatal("blocked below the ceiling")
	}
	if wait, blocked := l.Fail("192.0.2.1", "wrong-4"); !blocked || wait != 20 {
		t.Fatalf("over the ceiling: blocked %v, wait %d, want 20 s", blocked, wait)
	}
	// Keys used from the address still act; a key never used from it waits
	// (a right guess answered apart from wrong ones would make the ceiling
	// useless); elsewhere it is welcome.
	for _, fp := range []string{"alice", "bob"} {
		if _, ok := l.Admit("192.0.2.1", fp); !ok {
			t.Fatalf("%s, used from the address, refused over its ceiling", fp)
		}
	}
	if wait, ok := l.Admit("192.0.2.1", "carol"); ok || wait != 20 {
		t.Fatalf("a key new to the address over its ceiling: ok %v, wait %d", ok, wait)
	}
	if _, ok := l.Admit("192.0.2.2", "carol"); !ok {
		t.Fatal("a valid key refused at another address")
	}
	now = now.Add(20 * time.Second)
	if _, ok := l.Admit("192.0.2.1", "carol"); !ok {
		t.Fatal("still refused once the ceiling has a token again")
	}

	// One IPv6 /64 is one address.
	v6 := auth.NewFailureLimiter(auth.FailureLimits{PerMinute: 6, Burst: 1, AddressPerMinute: 6, AddressBurst: 1, Tracked: 10})
	v6.Fail("2001:db8::1", "wrong")
	if _, blocked := v6.Fail("2001:db8::2", "other"); !blocked {
		t.Fatal("another address of the same /64 is not blocked")
	}
	if _, blocked := v6.Fail("2001:db8:1::1", "other"); blocked {
		t.Fatal("another /64 is blocked")
	}

	// Bounded: at most 3 entries per table.
	for i := range 10 {
		l.Fail(fmt.Sprintf("198.51.100.%d", i), "wrong")
		l.Remember(fmt.Sprintf("198.51.100.%d", i), "alice")
	}
	if keys, addrs := l.Len(); keys > 3 || addrs > 3 {
		t.Fatalf("%d keys and %d addresses tracked, want at most 3", keys, addrs)
	}
}

func TestMiddlewareThrottlesFailures(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa,bob:bbbbbbbbbbbbbbbbbbbb")
	k := auth.NewKeys(keys, nil)
	k.QueryTokenPath = "/ws"
	k.Failures = auth.NewFailureLimiter(auth.FailureLimits{PerMinute: 1, Burst: 2, AddressPerMinute: 1, AddressBurst: 4, Tracked: 100})
	k.Origins = auth.Origins{Patterns: []string{"app.example.com"}}
	e := echo.New()
	e.IPExtractor = echo.ExtractIPDirect()
	ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
	e.GET("/x", ok, k.Middleware())
	e.GET("/ws", ok, k.Middleware())
	do := func(remote, path, key string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = remote + ":1234"
		req.Header.Set("X-Forwarded-For", "198.51.100.7") // not trusted
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	want := func(rec *httptest.ResponseRecorder, status int, what string) {
		t.Helper()
		if rec.Code != status {
			t.Fatalf("%s: %d %s, want %d", what, rec.Code, rec.Body, status)
		}
		if status == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%s: 429 without Retry-After", what)
		}
	}
	upgrade := []string{"Upgrade", "websocket", "Connection", "Upgrade"}
	// Nothing a page can make a browser send counts: no credential, a
	// query token on no upgrade, an upgrade from a foreign origin; nor does
	// a malformed Authorization. Successful requests use no budget.
	for i := range 20 {
		want(do("192.0.2.1", "/x", ""), 401, "no credential")
		want(do("192.0.2.1", fmt.Sprintf("/ws?token=guess-%d-0123456789", i), ""), 401, "a query token, no upgrade")
		want(do("192.0.2.1", "/x?token=aaaaaaaaaaaaaaaaaaaa", ""), 401, "a query token off the WebSocket")
		want(do("192.0.2.1", fmt.Sprintf("/ws?token=guess-%d-0123456789", i), "", append(upgrade, "Origin", "http://evil.example")...), 403, "an upgrade from a foreign page")
		want(do("192.0.2.1", "/x", "", "Authorization", "Basic YTpi"), 401, "not Bearer")
		want(do("192.0.2.1", "/x", "aaaaaaaaaaaaaaaaaaaa"), 200, "valid key")
	}
	want(do("192.0.2.1", "/ws?token=bbbbbbbbbbbbbbbbbbbb", "", append(upgrade, "Origin", "https://app.example.com")...), 200, "an upgrade from an allowed page")
	want(do("192.0.2.1", "/ws?token=bbbbbbbbbbbbbbbbbbbb", "", upgrade...), 200, "an upgrade without Origin (the CLI)")

	// A wrong key's own budget.
	for range 2 {
		want(do("192.0.2.1", "/x", "wrong-key-0123456789"), 401, "wrong key")
	}
	want(do("192.0.2.1", "/x", "wrong-key-0123456789"), 429, "wrong key over its budget")
	want(do("192.0.2.1", "/ws?token=wrong-key-0123456789", "", upgrade...), 429, "the same key in ?token=")
	want(do("192.0.2.1", "/x", "aaaaaaaaaaaaaaaaaaaa"), 200, "a valid key after another's failures")
	// The address's ceiling: 4 failures of any keys.
	want(do("192.0.2.1", "/x", "other-wrong-key-0123"), 401, "another wrong key")
	want(do("192.0.2.1", "/ws?token=third-wrong-key-0123", "", upgrade...), 401, "a third wrong key in ?token=")
	want(do("192.0.2.1", "/x", "fourth-wrong-key-012"), 429, "a wrong key over the address's ceiling")
	want(do("192.0.2.1", "/x", "aaaaaaaaaaaaaaaaaaaa"), 200, "a key used from the address, over its ceiling")
	want(do("192.0.2.1", "/x", "bbbbbbbbbbbbbbbbbbbb"), 200, "bob's key, used from the address in ?token=")
	want(do("192.0.2.2", "/x", "fourth-wrong-key-012"), 401, "another address")
}

// TestParseKeysLines: entries may be on lines of their own (a file); every
// bad entry is reported with its line and entry, never with its key.
func TestParseKeysLines(t *testing.T) {
	keys, err := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa\r\n\nbob:bbbbbbbbbbbbbbbbbbbb, carol:cccccccccccccccccccc\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0].User != "alice" || keys[1].User != "bob" || keys[2].User != "carol" || keys[0].Secret != "aaaaaaaaaaaaaaaaaaaa" {
		t.Fatalf("keys = %+v", keys)
	}
	_, err = auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa\nbob:tooShortKey, carol:cccccccccccccccccccc\nshortanon")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`line 2, entry 1 (user "bob")`, "line 3, entry 1:", "(got 11)", "(got 9)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for _, secret := range []string{"tooShortKey", "shortanon"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows a key", err)
		}
	}
	if _, err := auth.ParseKeys("bob:short"); err == nil || strings.Contains(err.Error(), "line") || !strings.Contains(err.Error(), "entry 1") {
		t.Errorf("one line: %v, want the entry without a line", err)
	}
}

// TestReplace: replaced keys judge the next request (an added key works, a
// removed one is a 401, administrators follow); Replace names the keys
// that no longer act for their user, a key given to another user too.
func TestReplace(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa,bob:bbbbbbbbbbbbbbbbbbbb,carol:cccccccccccccccccccc")
	k := auth.NewKeys(keys, map[string]bool{"alice": true})
	next, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa,dave:dddddddddddddddddddd,erin:cccccccccccccccccccc")
	removed := k.Replace(next, map[string]bool{"dave": true})
	got := map[string]string{}
	for _, r := range removed {
		got[r.User] = r.Fingerprint
	}
	if len(removed) != 2 || got["bob"] != auth.Fingerprint("bbbbbbbbbbbbbbbbbbbb") || got["carol"] != auth.Fingerprint("cccccccccccccccccccc") {
		t.Fatalf("removed %+v, want bob's key and carol's (now erin's)", removed)
	}
	for secret, want := range map[string]string{"aaaaaaaaaaaaaaaaaaaa": "alice", "bbbbbbbbbbbbbbbbbbbb": "", "dddddddddddddddddddd": "dave", "cccccccccccccccccccc": "erin"} {
		if user, ok := k.User(secret); user != want || ok != (want != "") {
			t.Errorf("User(%s…) = %q %v, want %q", secret[:1], user, ok, want)
		}
	}
	if _, ok := k.KeyUser(auth.Fingerprint("bbbbbbbbbbbbbbbbbbbb")); ok {
		t.Error("a session of bob's removed key is still valid")
	}
	if k.IsAdminUser("alice") || !k.IsAdminUser("dave") {
		t.Error("the administrators were not replaced")
	}
	if again := k.Replace(next, nil); len(again) != 0 {
		t.Errorf("the same keys again removed %+v", again)
	}
}

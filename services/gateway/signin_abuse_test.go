package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway"
)

// Issue 26, finding 3: what a web page can make a visitor's browser send
// must not lock the visitor's address (and everyone behind the same NAT)
// out, and one client's wrong key must not lock out the others.

// TestCredentiallessRequestsDoNotLockOut: requests without a credential —
// <img src=…/v1/x> from any site, or …/v1/ws?token=… that is no WebSocket
// upgrade — are 401s that use no failure budget; a session and keys from
// the address keep working, also after wrong keys.
func TestCredentiallessRequestsDoNotLockOut(t *testing.T) {
	s := newStack(t) // the default budget: 10 failures of a key at once
	cookie, _ := signIn(t, s.base, aliceKey)
	for i := range 30 {
		s.call(t, "", "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
		s.call(t, "", "GET", "/v1/x", nil).wantError(http.StatusUnauthorized)
		s.call(t, "", "GET", fmt.Sprintf("/v1/ws?token=page-guess-%02d-0123456789", i), nil).wantError(http.StatusUnauthorized)
	}
	browserCall(t, s.base, cookie, "", "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, nil)

	// Wrong keys, more than one key's budget but each key once: still
	// 401s, and the address's valid credentials keep working.
	for i := range 15 {
		s.call(t, fmt.Sprintf("wrong-key-%02d-0123456789", i), "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	}
	browserCall(t, s.base, cookie, "", "GET", "/v1/session", nil).want(http.StatusOK, nil)
	s.call(t, aliceKey, "GET", "/v1/tools", nil).want(http.StatusOK, nil)
	signIn(t, s.base, bobKey) // a first sign-in from the address
	s.dial(t, adminKey)       // and the WebSocket's query token
}

// TestWrongKeyDoesNotLockOutOthers: failures of one presented key use that
// key's budget at the address: beyond it that key gets 429 (also at
// sign-in), while another user's valid key from the same address — a
// first use there included — and another wrong key are judged as usual.
func TestWrongKeyDoesNotLockOutOthers(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.AuthFailureBurst, c.AuthFailuresPerMinute = 3, 1 }
	})
	const wrong = "wrong-key-0123456789"
	for range 3 {
		s.call(t, wrong, "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	}
	for range 10 {
		r := s.call(t, wrong, "GET", "/v1/tools", nil)
		r.wantError(http.StatusTooManyRequests)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", r.header)
		}
	}
	browserCall(t, s.base, "", s.base, "POST", "/v1/session", map[string]string{"apiKey": wrong}).wantError(http.StatusTooManyRequests)

	// Someone else behind the same address.
	s.call(t, bobKey, "GET", "/v1/tools", nil).want(http.StatusOK, nil)
	cookie, _ := signIn(t, s.base, bobKey)
	browserCall(t, s.base, cookie, "", "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	s.call(t, "bob-typo-key-0123456789", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	s.dial(t, aliceKey)
	// The wrong key is still refused.
	s.call(t, wrong, "GET", "/v1/tools", nil).wantError(http.StatusTooManyRequests)
}

// callFrom sends a request as the client at addr behind the trusted proxy
// 127.0.0.1 (X-Forwarded-For), with key (Authorization) or cookie when
// not empty, and the gateway's own Origin.
func callFrom(t *testing.T, base, addr, key, cookie, method, path string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(mustJSON(body))
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", addr)
	req.Header.Set("Origin", base)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if cookie != "" {
		req.Header.Set("Cookie", "alicia_session="+cookie)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(t, req, method, path+" from "+addr)
}

// TestAddressCeiling: many different wrong keys from one address (a NAT)
// reach its ceiling. Then wrong keys get 429, and so does a valid key
// never used from there (a right guess must not be told apart from wrong
// ones); the sessions and keys its users already use keep working, and
// other addresses are not concerned.
func TestAddressCeiling(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.AuthAddressFailureBurst, c.AuthAddressFailuresPerMinute = 5, 1
			c.TrustedProxies, _ = gateway.ParseProxies("127.0.0.1")
		}
	})
	const nat, elsewhere = "203.0.113.7", "198.51.100.9"
	var got sessionJSON
	r := callFrom(t, s.base, nat, "", "", "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, &got)
	cookie := sessionCookie(t, r).Value
	callFrom(t, s.base, nat, adminKey, "", "GET", "/v1/tools", nil).want(http.StatusOK, nil)

	for i := range 5 {
		callFrom(t, s.base, nat, fmt.Sprintf("guess-%02d-0123456789", i), "", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
	}
	r = callFrom(t, s.base, nat, "guess-05-0123456789", "", "GET", "/v1/tools", nil)
	r.wantError(http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.header)
	}
	callFrom(t, s.base, nat, "", "", "POST", "/v1/session", map[string]string{"apiKey": "guess-06-0123456789"}).wantError(http.StatusTooManyRequests)
	callFrom(t, s.base, nat, "", "", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized) // no credential: no 429

	// What the NAT's users already use.
	callFrom(t, s.base, nat, "", cookie, "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	callFrom(t, s.base, nat, adminKey, "", "GET", "/v1/tools", nil).want(http.StatusOK, nil)
	callFrom(t, s.base, nat, "", "", "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, nil)
	// A key new to the NAT waits, like a guess; elsewhere it is welcome.
	callFrom(t, s.base, nat, bobKey, "", "GET", "/v1/tools", nil).wantError(http.StatusTooManyRequests)
	callFrom(t, s.base, nat, "", "", "POST", "/v1/session", map[string]string{"apiKey": bobKey}).wantError(http.StatusTooManyRequests)
	callFrom(t, s.base, elsewhere, bobKey, "", "GET", "/v1/tools", nil).want(http.StatusOK, nil)
	callFrom(t, s.base, elsewhere, "guess-05-0123456789", "", "GET", "/v1/tools", nil).wantError(http.StatusUnauthorized)
}

// TestAuthAndSessionSettings: the settings' defaults, variables and bounds.
func TestAuthAndSessionSettings(t *testing.T) {
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "me:0123456789abcdef")
	vars := []string{"ALICIA_AUTH_FAILURES_PER_MINUTE", "ALICIA_AUTH_FAILURE_BURST", "ALICIA_AUTH_ADDRESS_FAILURES_PER_MINUTE",
		"ALICIA_AUTH_ADDRESS_FAILURE_BURST", "ALICIA_AUTH_FAILURE_ADDRESSES", "ALICIA_SESSIONS_PER_USER"}
	for _, v := range vars {
		t.Setenv(v, "")
	}
	c, err := gateway.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{c.AuthFailuresPerMinute, c.AuthFailureBurst, c.AuthAddressFailuresPerMinute, c.AuthAddressFailureBurst,
		c.AuthFailureAddresses, c.SessionsPerUser}; fmt.Sprint(got) != "[10 10 30 100 10000 20]" {
		t.Fatalf("defaults %v", got)
	}
	for i, v := range vars {
		t.Setenv(v, fmt.Sprint(i+2))
	}
	c, err = gateway.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{c.AuthFailuresPerMinute, c.AuthFailureBurst, c.AuthAddressFailuresPerMinute, c.AuthAddressFailureBurst,
		c.AuthFailureAddresses, c.SessionsPerUser}; fmt.Sprint(got) != "[2 3 4 5 6 7]" {
		t.Fatalf("from the environment %v", got)
	}
	for _, bad := range []struct {
		name string
		mod  func(*gateway.Config)
		want string
	}{
		{"no sessions", func(c *gateway.Config) { c.SessionsPerUser = 0 }, "ALICIA_SESSIONS_PER_USER"},
		{"too many sessions", func(c *gateway.Config) { c.SessionsPerUser = 1001 }, "ALICIA_SESSIONS_PER_USER"},
		{"no address ceiling", func(c *gateway.Config) { c.AuthAddressFailureBurst = 0 }, "ALICIA_AUTH_ADDRESS_FAILURE_BURST"},
		{"no address refill", func(c *gateway.Config) { c.AuthAddressFailuresPerMinute = 0 }, "ALICIA_AUTH_ADDRESS_FAILURES_PER_MINUTE"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			c := gateway.DefaultConfig()
			c.PostgresURL, c.APIKeys = "postgres://x@127.0.0.1/db", "me:0123456789abcdef"
			bad.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("Validate: %v, want an error naming %s", err, bad.want)
			}
		})
	}
}

// Finding 4: the SESSIONS bucket cannot be filled by signing in.

// sessionsByUser counts the session records the SESSIONS bucket holds, by
// user, and returns the bucket's stream state. The keys come from the
// stream's subjects: a key lister's watcher waits for markers that expire
// while it lists.
func sessionsByUser(t *testing.T, s *stack) (map[string]int, jetstream.StreamState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV.SESSIONS.>"))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	for subject := range info.State.Subjects {
		k := strings.TrimPrefix(subject, "$KV.SESSIONS.")
		if len(k) != 64 { // a session is keyed by a SHA-256 in hex
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // ended: a marker
		}
		var rec struct {
			User string `json:"user"`
		}
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatalf("session %s: %v", k, err)
		}
		users[rec.User]++
	}
	return users, info.State
}

// TestSessionsPerUserCapped: a user holds at most ALICIA_SESSIONS_PER_USER
// sessions (20 by default); signing in beyond ends the oldest.
func TestSessionsPerUserCapped(t *testing.T) {
	s := newStack(t)
	bob, _ := signIn(t, s.base, bobKey)
	var cookies []string
	for range 21 {
		c, _ := signIn(t, s.base, aliceKey)
		cookies = append(cookies, c)
	}
	browserCall(t, s.base, cookies[0], "", "GET", "/v1/session", nil).wantError(http.StatusUnauthorized)
	for _, c := range cookies[1:] {
		browserCall(t, s.base, c, "", "GET", "/v1/session", nil).want(http.StatusOK, nil)
	}
	browserCall(t, s.base, bob, "", "GET", "/v1/session", nil).want(http.StatusOK, nil)
	if users, _ := sessionsByUser(t, s); users["alice"] != 20 || users["bob"] != 1 {
		t.Fatalf("the bucket holds %v sessions by user, want alice 20, bob 1", users)
	}
}

// TestSessionsCappedUnderConcurrentSignIns: sign-ins at once, on two
// replicas, keep the cap: exactly that many of their cookies work.
func TestSessionsCappedUnderConcurrentSignIns(t *testing.T) {
	s := newStack(t)
	other, _ := s.replica(t, nil, nil)
	var mu sync.Mutex
	var cookies []string
	var wg sync.WaitGroup
	for i := range 40 {
		base := s.base
		if i%2 == 1 {
			base = other
		}
		wg.Go(func() {
			c, err := signInQuietly(base, adminKey)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			cookies = append(cookies, c)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	valid := 0
	for _, c := range cookies {
		if browserCall(t, s.base, c, "", "GET", "/v1/session", nil).status == http.StatusOK {
			valid++
		}
	}
	if valid != 20 {
		t.Fatalf("%d of 40 sessions work, want 20", valid)
	}
	if users, _ := sessionsByUser(t, s); users["root"] != 20 {
		t.Fatalf("the bucket holds %v sessions by user, want root 20", users)
	}
}

// signInQuietly is signIn for another goroutine than the test's.
func signInQuietly(base, key string) (string, error) {
	req, err := http.NewRequest("POST", base+"/v1/session", strings.NewReader(`{"apiKey":"`+key+`"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("sign in: %d %s", resp.StatusCode, b)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "alicia_session" && c.Value != "" {
			return c.Value, nil
		}
	}
	return "", fmt.Errorf("sign in: no cookie")
}

// TestSignInChurnDoesNotFillTheBucket: signing in and out again and again
// leaves nothing behind for the session's lifetime (a delete marker kept
// 7 days each would fill the bucket as surely as sessions).
func TestSignInChurnDoesNotFillTheBucket(t *testing.T) {
	s := newStack(t)
	signIn(t, s.base, bobKey)
	for range 60 {
		c, _ := signIn(t, s.base, aliceKey)
		browserCall(t, s.base, c, s.base, "DELETE", "/v1/session", nil).want(http.StatusNoContent, nil)
	}
	// Signing in again with a cookie ends the old session, too.
	c, _ := signIn(t, s.base, aliceKey)
	for range 30 {
		r := browserCall(t, s.base, c, s.base, "POST", "/v1/session", map[string]string{"apiKey": aliceKey}).want(http.StatusCreated, nil)
		c = sessionCookie(t, r).Value
	}
	var state jetstream.StreamState
	testkit.Eventually(t, 15*time.Second, func() bool {
		_, state = sessionsByUser(t, s)
		return state.Msgs <= 10
	}, "the bucket keeps what signing out ended")
	if users, _ := sessionsByUser(t, s); users["alice"] != 1 || users["bob"] != 1 {
		t.Fatalf("sessions by user %v, want alice 1, bob 1 (%d messages)", users, state.Msgs)
	}
}

// TestSessionsBucketMetrics: /metrics tells how full the bucket is.
func TestSessionsBucketMetrics(t *testing.T) {
	s := newStack(t)
	signIn(t, s.base, aliceKey)
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	if !strings.Contains(body, "\nalicia_gateway_sessions_max_bytes 6.7108864e+07\n") {
		t.Fatalf("no alicia_gateway_sessions_max_bytes of 64 MiB in /metrics:\n%s", grepLines(body, "alicia_gateway"))
	}
	if !strings.Contains(body, "\nalicia_gateway_sessions_bytes ") {
		t.Fatalf("no alicia_gateway_sessions_bytes in /metrics:\n%s", grepLines(body, "alicia_gateway"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

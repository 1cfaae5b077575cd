package gateway_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/localca"
	"github.com/alicia-voice/alicia/services/gateway"
)

// wantBothCleared: a sign-out's answer drops the session cookie under both
// its names.
func wantBothCleared(t *testing.T, h http.Header) {
	t.Helper()
	cleared := map[string]bool{}
	for _, c := range (&http.Response{Header: h}).Cookies() {
		cleared[c.Name] = c.Value == "" && c.MaxAge < 0 && c.Path == "/"
	}
	if !cleared["alicia_session"] || !cleared["__Host-alicia_session"] {
		t.Fatalf("sign-out Set-Cookie %q, want both names cleared", h.Values("Set-Cookie"))
	}
}

// TestHSTSAndHostCookieOverTLS: over the gateway's own TLS every answer
// has Strict-Transport-Security (a year, no includeSubDomains) and the
// session cookie is __Host-alicia_session (Secure, Path=/, no Domain),
// read by every route; plain HTTP to loopback has no HSTS and the plain
// cookie name.
func TestHSTSAndHostCookieOverTLS(t *testing.T) {
	dir := t.TempDir()
	files, err := localca.Ensure(dir, "Alicia local CA (test)", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	httpsAddr := make(chan string, 1)
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.TLS = gateway.TLS{Addrs: []string{"127.0.0.1:0"}, CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CACert,
				Ready: func(a []string) { httpsAddr <- a[0] }}
		}
	})
	secure := "https://" + <-httpsAddr
	hc := httpsClient(t, files.CACert)
	do := func(client *http.Client, base, method, path, cookie, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", base)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	signIn := `{"apiKey": "` + aliceKey + `"}`

	for _, path := range []string{"/healthz", "/", "/v1/conversations"} {
		if got := do(hc, secure, "GET", path, "", "").Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("GET %s over TLS: Strict-Transport-Security %q", path, got)
		}
		if got := do(http.DefaultClient, s.base, "GET", path, "", "").Header.Values("Strict-Transport-Security"); len(got) != 0 {
			t.Errorf("GET %s over plain HTTP to loopback: Strict-Transport-Security %q", path, got)
		}
	}

	// Plain HTTP: the plain name, not Secure.
	resp := do(http.DefaultClient, s.base, "POST", "/v1/session", "", signIn)
	if cs := resp.Cookies(); resp.StatusCode != http.StatusCreated || len(cs) != 1 || cs[0].Name != "alicia_session" || cs[0].Secure {
		t.Fatalf("sign-in over HTTP: %d %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
	}

	// TLS: __Host-alicia_session.
	resp = do(hc, secure, "POST", "/v1/session", "", signIn)
	cs := resp.Cookies()
	if resp.StatusCode != http.StatusCreated || len(cs) != 1 {
		t.Fatalf("sign-in over TLS: %d %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
	}
	c := cs[0]
	if c.Name != "__Host-alicia_session" || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("Set-Cookie over TLS %q", resp.Header.Values("Set-Cookie"))
	}
	hostCookie := "__Host-alicia_session=" + c.Value
	if resp := do(hc, secure, "GET", "/v1/session", hostCookie, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/session with the __Host- cookie: %d", resp.StatusCode)
	}
	if resp := do(hc, secure, "POST", "/v1/conversations", hostCookie, ""); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/conversations with the __Host- cookie: %d", resp.StatusCode)
	}
	// Over TLS the plain name could have been planted (a sibling host, a
	// plain-HTTP answer): it is not read.
	if resp := do(hc, secure, "GET", "/v1/session", "alicia_session="+c.Value, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/session over TLS with the plain name: %d, want 401", resp.StatusCode)
	}
	resp = do(hc, secure, "DELETE", "/v1/session", hostCookie, "")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	wantBothCleared(t, resp.Header)
	if resp := do(hc, secure, "GET", "/v1/session", hostCookie, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/session after sign-out: %d", resp.StatusCode)
	}
}

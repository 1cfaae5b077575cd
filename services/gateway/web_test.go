package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway"
)

// TestWebClientRoutes: the embedded client answers client routes with
// index.html; the API's unknown routes keep their JSON 404 and the probes
// and metrics their own answers; every answer has the security headers.
func TestWebClientRoutes(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.LiveKit = gateway.LiveKit{URL: "ws://livekit:7880", PublicURL: "wss://voice.example.com", APIKey: "devkey",
				APISecret: strings.Repeat("s", 32), TokenTTL: time.Hour}
		}
	})
	for _, c := range []struct {
		name, path, key string
		status          int
		contentType     string // prefix
	}{
		{"root", "/", "", 200, "text/html"},
		{"client route", "/c/ac_123", "", 200, "text/html"},
		{"client route, memories", "/memories", "", 200, "text/html"},
		{"unknown api route", "/v1/nothing-here", aliceKey, 404, "application/json"},
		{"unknown api route without key", "/v1/nothing-here", "", 401, "application/json"},
		{"api", "/v1/conversations", aliceKey, 200, "application/json"},
		{"api without key", "/v1/conversations", "", 401, "application/json"},
		{"healthz", "/healthz", "", 200, "text/plain"},
		{"readyz", "/readyz", "", 200, "text/plain"},
		{"metrics", "/metrics", "", 200, "text/plain"},
		{"missing asset", "/assets/missing-0000.js", "", 404, "application/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.call(t, c.key, "GET", c.path, nil)
			if r.status != c.status || !strings.HasPrefix(r.header.Get("Content-Type"), c.contentType) {
				t.Fatalf("GET %s = %d %s %q", c.path, r.status, r.header.Get("Content-Type"), r.body)
			}
			if c.contentType != "text/html" && strings.Contains(string(r.body), "<title>") {
				t.Fatalf("GET %s answered with the client: %s", c.path, r.body)
			}
			if c.status >= 400 {
				r.wantError(c.status)
			}
			for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
				if got := r.header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			csp := r.header.Get("Content-Security-Policy")
			if c.contentType == "text/html" {
				if !strings.Contains(csp, "connect-src 'self' wss://voice.example.com https://voice.example.com;") ||
					!strings.Contains(csp, "frame-ancestors 'none'") {
					t.Errorf("CSP %q", csp)
				}
			} else if csp != "" {
				t.Errorf("CSP on %s: %q", c.contentType, csp)
			}
		})
	}
	// HEAD of a probe is not the client either.
	req, _ := http.NewRequest(http.MethodHead, s.base+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HEAD /healthz answered with the client (%d)", resp.StatusCode)
	}
}

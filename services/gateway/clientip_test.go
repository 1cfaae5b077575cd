package gateway_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway"
)

// TestTrustedProxies: ALICIA_TRUSTED_PROXIES takes addresses and CIDR
// ranges (a bad one is an error naming the variable); with none, a
// request is counted under its peer's address whatever X-Forwarded-For
// says; with a proxy, a request from it is counted under the client
// address the proxy appended, and any other peer (loopback and private
// ones included) under its own.
func TestTrustedProxies(t *testing.T) {
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "me:0123456789abcdef")
	t.Setenv("ALICIA_TRUSTED_PROXIES", "")
	c, err := gateway.ConfigFromEnv()
	if err != nil || c.TrustedProxies != nil {
		t.Fatalf("default: %v, %v", c.TrustedProxies, err)
	}
	t.Setenv("ALICIA_TRUSTED_PROXIES", "172.31.250.10, 10.1.0.0/16,fd00::1")
	c, err = gateway.ConfigFromEnv()
	if err != nil || len(c.TrustedProxies) != 3 || c.TrustedProxies[0].String() != "172.31.250.10/32" ||
		c.TrustedProxies[1].String() != "10.1.0.0/16" || c.TrustedProxies[2].String() != "fd00::1/128" {
		t.Fatalf("proxies %v, %v", c.TrustedProxies, err)
	}
	for _, bad := range []string{"proxy.example", "10.0.0.0/33", "1.2.3"} {
		t.Setenv("ALICIA_TRUSTED_PROXIES", bad)
		if _, err := gateway.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "ALICIA_TRUSTED_PROXIES") {
			t.Errorf("%q: err %v, want one naming ALICIA_TRUSTED_PROXIES", bad, err)
		}
	}

	proxies, err := gateway.ParseProxies("172.31.250.10")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer, xff string
		proxies         bool
		want            string
	}{
		{"no proxy configured: the peer", "203.0.113.7", "198.51.100.1", false, "203.0.113.7"},
		{"no proxy configured, a loopback peer", "127.0.0.1", "198.51.100.1", false, "127.0.0.1"},
		{"through the proxy", "172.31.250.10", "198.51.100.1", true, "198.51.100.1"},
		{"through the proxy, a client's own header before it", "172.31.250.10", "6.6.6.6, 198.51.100.1", true, "198.51.100.1"},
		{"through the proxy, no header", "172.31.250.10", "", true, "172.31.250.10"},
		{"a client that is not the proxy", "198.51.100.1", "6.6.6.6", true, "198.51.100.1"},
		{"another container on the network", "172.31.250.11", "6.6.6.6", true, "172.31.250.11"},
		{"loopback is not trusted unless named", "127.0.0.1", "6.6.6.6", true, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/v1/session", nil)
			req.RemoteAddr = tc.peer + ":40000"
			if tc.xff != "" {
				req.Header.Set(echo.HeaderXForwardedFor, tc.xff)
			}
			var p = proxies
			if !tc.proxies {
				p = nil
			}
			if got := gateway.ClientIP(p)(req); got != tc.want {
				t.Fatalf("client address %q, want %q", got, tc.want)
			}
		})
	}
}

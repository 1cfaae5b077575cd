package gateway

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestSecurityHeadersHSTS: Strict-Transport-Security over TLS, and on
// every answer behind a TLS proxy (ALICIA_COOKIE_SECURE); never on plain
// HTTP without one.
func TestSecurityHeadersHSTS(t *testing.T) {
	for _, c := range []struct {
		name      string
		behindTLS bool
		tls       bool
		want      string
	}{
		{"plain HTTP to loopback", false, false, ""},
		{"TLS", false, true, "max-age=31536000"},
		{"behind a TLS proxy", true, false, "max-age=31536000"},
		{"TLS behind a TLS proxy", true, true, "max-age=31536000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := echo.New()
			e.Use(securityHeadersFor(c.behindTLS))
			e.GET("/", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
			r := httptest.NewRequest("GET", "http://127.0.0.1:8080/", nil)
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			if got := w.Header().Values("Strict-Transport-Security"); len(got) > 1 || c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Fatalf("Strict-Transport-Security %q, want %q", got, c.want)
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("the other security headers are gone")
			}
		})
	}
}

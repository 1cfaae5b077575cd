package gateway

import "github.com/labstack/echo/v4"

// securityHeaders are on every answer of the gateway, API and web client
// alike: no MIME sniffing (a JSON error is never run as a script), no
// Referer to other sites (a client route names a conversation), and no
// framing (clickjacking). The client's HTML also gets a
// Content-Security-Policy (internal/webui).
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		return next(c)
	}
}

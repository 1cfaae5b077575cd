package gateway

import "github.com/labstack/echo/v4"

// hsts is the Strict-Transport-Security of an answer over TLS: a year, and
// no includeSubDomains, since the gateway does not own its sibling names.
const hsts = "max-age=31536000"

// securityHeadersFor sets the headers on every answer of the gateway, API and web client
// alike: no MIME sniffing (a JSON error is never run as a script), no
// Referer to other sites (a client route names a conversation), and no
// framing (clickjacking). The client's HTML also gets a
// Content-Security-Policy (internal/webui).
//
// Over TLS it is also Strict-Transport-Security (the browser will not try
// plain HTTP for this host again); with behindTLS (ALICIA_COOKIE_SECURE: a
// TLS proxy in front) on every answer, which the proxy passes on over
// HTTPS. Plain HTTP without it — loopback `alicia up` — never gets it: a
// browser that kept it would refuse http://localhost for a year (browsers
// ignore it over plain HTTP anyway, RFC 6797 §8.1).
func securityHeadersFor(behindTLS bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("X-Frame-Options", "DENY")
			if behindTLS || c.Request().TLS != nil {
				h.Set("Strict-Transport-Security", hsts)
			}
			return next(c)
		}
	}
}

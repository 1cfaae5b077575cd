package gateway

import (
	"net"

	"github.com/labstack/echo/v4"
)

// ClientIP extracts the address a request is counted under: the peer's,
// or, when the peer is one of proxies, the rightmost address of
// X-Forwarded-For that is not a trusted proxy (what the nearest untrusted
// hop connected from; anything a client wrote further left is ignored).
// Loopback, link-local and private peers are trusted only when proxies
// name them.
func ClientIP(proxies []*net.IPNet) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		opts = append(opts, echo.TrustIPRange(p))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

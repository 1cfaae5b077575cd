package webui

import (
	"net/url"
	"strings"
)

// ContentSecurityPolicy is the policy of the client's HTML: only the
// gateway's own origin, plus the LiveKit server's origins in connect-src
// when liveKitURL is set (the SDK signals over ws(s):// and asks http(s)://
// on the same host). The gateway README gives each directive's reason.
func ContentSecurityPolicy(liveKitURL string) string {
	connect := "'self'"
	for _, o := range liveKitOrigins(liveKitURL) {
		connect += " " + o
	}
	return strings.Join([]string{
		"default-src 'self'",
		"script-src 'self' 'wasm-unsafe-eval'",
		"style-src 'self'",
		"img-src 'self' data: blob:",
		"media-src 'self' blob:",
		"connect-src " + connect,
		"worker-src 'self' blob:",
		"manifest-src 'self'",
		"font-src 'self'",
		"object-src 'none'",
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'none'",
	}, "; ")
}

// liveKitOrigins are the WebSocket and HTTP origins of the LiveKit URL;
// none when it is empty or not a ws(s)/http(s) URL with a host.
func liveKitOrigins(raw string) []string {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || strings.ContainsAny(u.Host, " ;,'\"") {
		return nil
	}
	host := strings.ToLower(u.Host)
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
		return []string{"ws://" + host, "http://" + host}
	case "wss", "https":
		return []string{"wss://" + host, "https://" + host}
	}
	return nil
}

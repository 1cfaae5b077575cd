package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/netguard"
)

// webMaxRedirects caps the redirects one search follows.
const webMaxRedirects = 5

// errRedirectRefused is a redirect the search does not follow: a scheme
// other than http(s), a destination netguard refuses, or one too many.
var errRedirectRefused = errors.New("redirect refused")

// newSearchClient returns web_search's HTTP client. The endpoint the
// operator configured (its exact host and port) is dialled as it is; any
// other destination a redirect leads to goes through netguard, like an HTTP
// MCP server: it must resolve, when dialled, to public addresses only,
// unless ALICIA_MCP_ALLOWED_HOSTS names it. No proxy: it would resolve the
// destination instead of the guard.
func newSearchClient(cfg Config, endpoint *url.URL) *http.Client {
	guard := netguard.New(cfg.MCPAllowedHosts, cfg.MCPResolver, cfg.MCPDial)
	dial := cfg.MCPDial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	origin := hostPort(endpoint)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if normalizeAddr(addr) == origin {
			return dial(ctx, network, addr)
		}
		return guard.DialContext(ctx, network, addr)
	}
	return &http.Client{
		Timeout:   cfg.WebSearchTimeout,
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			u := req.URL
			if len(via) > webMaxRedirects {
				return fmt.Errorf("%w: more than %d redirects", errRedirectRefused, webMaxRedirects)
			}
			if u.Scheme != "http" && u.Scheme != "https" {
				return fmt.Errorf("%w: to a %s: URL, not http(s)", errRedirectRefused, u.Scheme)
			}
			// Names are checked when dialled; a literal is refused here already.
			if hostPort(u) != origin {
				if err := guard.CheckLiteral(u.Hostname()); err != nil {
					return fmt.Errorf("%w: %w", errRedirectRefused, err)
				}
			}
			return nil
		},
	}
}

// hostPort is u's destination as a dialer sees it, port included.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return normalizeAddr(net.JoinHostPort(u.Hostname(), port))
}

func normalizeAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.ToLower(host), "."), port)
}

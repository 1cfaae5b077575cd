package auth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Origins decides which browser origins may act with a session cookie:
// the gateway's own (the request's scheme and Host) and those matching
// Patterns.
type Origins struct {
	// Patterns are ALICIA_ALLOWED_ORIGINS, read as the WebSocket's
	// OriginPatterns are: a host pattern (app.example.com, *.example.com;
	// any scheme) or, with its scheme, an origin pattern
	// (https://app.example.com); path.Match syntax, case-insensitive.
	Patterns []string
	// Secure: browsers reach the gateway over https through a TLS proxy
	// (ALICIA_COOKIE_SECURE), so its own origin is https://<Host> though
	// the request came over plain HTTP.
	Secure bool
}

// ValidatePatterns reports the patterns path.Match cannot read.
func ValidatePatterns(patterns []string) error {
	var errs []error
	for _, p := range patterns {
		if _, err := path.Match(strings.ToLower(p), ""); err != nil {
			errs = append(errs, fmt.Errorf("origin pattern %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Check returns nil when origin (an Origin header) may act on r, or why not.
func (o Origins) Check(r *http.Request, origin string) error {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("origin %q is not a browser origin", origin)
	}
	scheme := "http"
	if r.TLS != nil || o.Secure {
		scheme = "https"
	}
	own := normalize(scheme, r.Host)
	if normalize(u.Scheme, u.Host) == own || o.matches(u) {
		return nil
	}
	return fmt.Errorf("origin %s is neither this gateway's (%s) nor in ALICIA_ALLOWED_ORIGINS", u.Scheme+"://"+u.Host, own)
}

// CheckUpgrade returns nil when origin may open a WebSocket with a key in
// ?token=: the rule the WebSocket's own check applies later (its host is
// the request's Host, or it matches Patterns), applied before the key is
// looked at, so another site's page cannot spend the failure budget.
func (o Origins) CheckUpgrade(r *http.Request, origin string) error {
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" && (strings.EqualFold(u.Host, r.Host) || o.matches(u)) {
		return nil
	}
	return fmt.Errorf("origin %q may not open the WebSocket: it is neither this gateway's host nor in ALICIA_ALLOWED_ORIGINS", origin)
}

// matches reports whether the origin u matches one of Patterns.
func (o Origins) matches(u *url.URL) bool {
	for _, p := range o.Patterns {
		target := strings.ToLower(u.Host)
		if strings.Contains(p, "://") {
			target = strings.ToLower(u.Scheme) + "://" + target
		}
		if ok, _ := path.Match(strings.ToLower(p), target); ok {
			return true
		}
	}
	return false
}

// normalize is scheme://host in lower case, without the scheme's default port.
func normalize(scheme, host string) string {
	host = strings.ToLower(host)
	if h, port, err := net.SplitHostPort(host); err == nil &&
		((scheme == "http" && port == "80") || (scheme == "https" && port == "443")) {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return scheme + "://" + host
}

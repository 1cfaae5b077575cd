// Package netguard keeps outgoing connections that a user can point
// somewhere (HTTP MCP servers) away from the deployment's own network:
// loopback, private, link-local, unique-local, CGNAT, multicast,
// unspecified and reserved addresses, cloud metadata included, unless the
// operator allowed the host by name. The check runs on the addresses
// actually dialled, so a redirect or a name that resolves elsewhere at
// connect time (DNS rebinding) is caught too.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// ErrRefused is the error of a refused destination.
var ErrRefused = errors.New("netguard: destination refused")

// blocked are the ranges Public refuses besides what netip classifies
// (loopback, private, link-local, multicast, unspecified).
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT (also a cloud's metadata at 100.100.100.200)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// embedsIPv4 are IPv6 ranges that carry an IPv4 address, which must be
// public too: NAT64 (the last 4 bytes) and 6to4 (bytes 2..5).
var (
	nat64      = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixToFour  = netip.MustParsePrefix("2002::/16")
	metadataV4 = netip.MustParseAddr("169.254.169.254")
)

// Public reports whether ip is a public unicast address a user-configured
// connection may reach.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsLoopback() || ip.IsPrivate() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip == metadataV4 {
		return false
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return false
		}
	}
	if ip.Is6() {
		b := ip.As16()
		for _, p := range nat64 {
			if p.Contains(ip) {
				return Public(netip.AddrFrom4([4]byte(b[12:16])))
			}
		}
		if sixToFour.Contains(ip) {
			return Public(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return true
}

// Resolver looks up a host's addresses; *net.Resolver fits.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection; (*net.Dialer).DialContext fits.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Guard decides which destinations connections may reach.
type Guard struct {
	allowed  map[string]bool
	resolver Resolver
	dial     DialFunc
}

// New returns a guard that allows public addresses and the hosts in
// allowed (names or IP literals, matched case-insensitively). resolver and
// dial may be nil: net.DefaultResolver and a net.Dialer are used.
func New(allowed []string, resolver Resolver, dial DialFunc) *Guard {
	g := &Guard{allowed: map[string]bool{}, resolver: resolver, dial: dial}
	for _, h := range allowed {
		if h = normalize(h); h != "" {
			g.allowed[h] = true
		}
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dial == nil {
		g.dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return g
}

func normalize(host string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(strings.TrimSpace(host), "[]")), ".")
}

// Allowed reports whether the operator allowed host.
func (g *Guard) Allowed(host string) bool { return g.allowed[normalize(host)] }

// localName is a name that means this host whatever DNS says.
func localName(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// CheckLiteral refuses, without resolving anything, a host that is not
// allowed and is a non-public IP literal or a localhost name. A name is
// left to the dial-time check (or to Check).
func (g *Guard) CheckLiteral(host string) error {
	h := normalize(host)
	if g.allowed[h] {
		return nil
	}
	if localName(h) {
		return fmt.Errorf("%w: %s is this host, not a public address", ErrRefused, host)
	}
	if ip, err := netip.ParseAddr(h); err == nil && !Public(ip) {
		return fmt.Errorf("%w: %s is not a public address", ErrRefused, host)
	}
	return nil
}

// Check resolves host (unless allowed or an IP literal) and refuses it
// when any of its addresses is not public.
func (g *Guard) Check(ctx context.Context, host string) ([]netip.Addr, error) {
	if err := g.CheckLiteral(host); err != nil {
		return nil, err
	}
	h := normalize(host)
	if ip, err := netip.ParseAddr(h); err == nil {
		return []netip.Addr{ip}, nil
	}
	if g.allowed[h] {
		return nil, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", h)
	if err != nil {
		return nil, fmt.Errorf("netguard: resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("netguard: %s has no address", host)
	}
	for _, ip := range addrs {
		if !Public(ip) {
			return nil, fmt.Errorf("%w: %s resolves to %s, which is not a public address", ErrRefused, host, ip)
		}
	}
	return addrs, nil
}

// DialContext dials addr ("host:port") only when the host is allowed or
// every address it resolves to now is public; it then dials those very
// addresses, so nothing resolves the name again between the check and the
// connection. Use it as an http.Transport's DialContext (with no proxy).
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netguard: %w", err)
	}
	if g.Allowed(host) {
		return g.dial(ctx, network, addr)
	}
	addrs, err := g.Check(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range addrs {
		c, err := g.dial(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

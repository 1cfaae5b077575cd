package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/pkg/netguard"
)

func TestPublic(t *testing.T) {
	for _, c := range []struct {
		ip     string
		public bool
	}{
		{"93.184.215.14", true},
		{"2606:4700::1111", true},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"172.32.0.1", true},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // metadata
		{"169.254.1.1", false},
		{"fe80::1", false},
		{"fc00::1", false},
		{"fd00:ec2::254", false}, // metadata over IPv6
		{"100.64.0.1", false},    // CGNAT
		{"100.100.100.200", false},
		{"224.0.0.1", false},
		{"ff02::1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"255.255.255.255", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"64:ff9b::7f00:1", false}, // NAT64 of 127.0.0.1
		{"2002:a00:1::", false},    // 6to4 of 10.0.0.1
	} {
		t.Run(c.ip, func(t *testing.T) {
			if got := netguard.Public(netip.MustParseAddr(c.ip)); got != c.public {
				t.Fatalf("Public(%s) = %v, want %v", c.ip, got, c.public)
			}
		})
	}
}

// fakeResolver answers from a table; nothing goes to DNS.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, ip := range ips {
		out = append(out, netip.MustParseAddr(ip))
	}
	return out, nil
}

// recorder is a dial function that records what it was asked to dial and
// never connects anywhere.
type recorder struct {
	mu    sync.Mutex
	addrs []string
}

var errNotDialled = errors.New("test dialer: recorded, not dialled")

func (r *recorder) dial(_ context.Context, _, addr string) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs = append(r.addrs, addr)
	return nil, errNotDialled
}

func TestDialContextRefusals(t *testing.T) {
	res := fakeResolver{
		"public.example":   {"93.184.215.14"},
		"rebind.example":   {"127.0.0.1"},
		"mixed.example":    {"93.184.215.14", "10.0.0.5"},
		"meta.example":     {"169.254.169.254"},
		"private6.example": {"fd12::1"},
		"allowed.example":  {"10.0.0.7"},
	}
	for _, c := range []struct {
		addr    string
		refused bool
		dialled string
	}{
		{"127.0.0.1:80", true, ""},
		{"[::1]:80", true, ""},
		{"10.0.0.1:80", true, ""},
		{"172.16.5.4:443", true, ""},
		{"192.168.0.1:80", true, ""},
		{"169.254.169.254:80", true, ""},
		{"[fc00::1]:80", true, ""},
		{"localhost:80", true, ""},
		{"api.localhost:80", true, ""},
		{"rebind.example:80", true, ""}, // resolves to loopback at connect time
		{"mixed.example:80", true, ""},
		{"meta.example:80", true, ""},
		{"private6.example:80", true, ""},
		{"public.example:443", false, "93.184.215.14:443"},
		{"allowed.example:8080", false, "allowed.example:8080"}, // the operator allowed it
		{"ALLOWED.example.:8080", false, "ALLOWED.example.:8080"},
	} {
		t.Run(c.addr, func(t *testing.T) {
			rec := &recorder{}
			g := netguard.New([]string{"allowed.example"}, res, rec.dial)
			_, err := g.DialContext(context.Background(), "tcp", c.addr)
			if c.refused {
				if !errors.Is(err, netguard.ErrRefused) {
					t.Fatalf("err %v, want ErrRefused", err)
				}
				if len(rec.addrs) != 0 {
					t.Fatalf("dialled %v", rec.addrs)
				}
				return
			}
			if !errors.Is(err, errNotDialled) || len(rec.addrs) != 1 || rec.addrs[0] != c.dialled {
				t.Fatalf("err %v, dialled %v, want %s", err, rec.addrs, c.dialled)
			}
		})
	}
}

func TestCheckLiteral(t *testing.T) {
	g := netguard.New([]string{"127.0.0.1"}, fakeResolver{}, nil)
	for host, ok := range map[string]bool{"127.0.0.1": true, "127.0.0.2": false, "::1": false, "localhost": false,
		"10.9.8.7": false, "mcp.example": true, "93.184.215.14": true} {
		if err := g.CheckLiteral(host); (err == nil) != ok {
			t.Errorf("CheckLiteral(%s) = %v", host, err)
		}
	}
}

// TestRedirectIsChecked: a redirect from an allowed host to an internal
// address is refused when its connection is dialled.
func TestRedirectIsChecked(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer target.Close()
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.2:"+port+"/", http.StatusFound)
	}))
	defer redirector.Close()
	g := netguard.New([]string{"127.0.0.1"}, fakeResolver{}, nil)
	client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext}}
	resp, err := client.Get(redirector.URL)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("redirect to 127.0.0.2: %v, want ErrRefused", err)
	}
}

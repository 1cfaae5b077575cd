package tools_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alicia-voice/alicia/pkg/netguard"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// redirectingSearch is a search endpoint on 127.0.0.1 (the configured one,
// so it is dialled as it is) whose /html/ redirects to location, or, with
// hops > 0, walks /hop/1 … /hop/{hops} on itself and then serves results.
func redirectingSearch(t *testing.T, location string, hops int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	page, err := os.ReadFile("testdata/ddg_results.html")
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var k int
		switch {
		case r.URL.Path == "/html/" && hops == 0:
			http.Redirect(w, r, location, http.StatusFound)
			return
		case r.URL.Path == "/html/":
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d", &k); err != nil {
				http.NotFound(w, r)
				return
			}
		default:
			http.NotFound(w, r)
			return
		}
		if k < hops {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d?%s", k+1, r.URL.RawQuery), http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		_, _ = w.Write(page)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// internalService stands for something on the deployment's own network.
func internalService(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	page, err := os.ReadFile("testdata/ddg_results.html")
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		_, _ = w.Write(page)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// resolver answers every name with 127.0.0.1, as a rebinding DNS would.
type resolver struct{}

func (resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

func TestWebSearchRedirectToInternalRefused(t *testing.T) {
	internal, reached := internalService(t)
	port := internal.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	for _, tc := range []struct {
		name     string
		location string
		message  string
	}{
		{"loopback address", internal.URL + "/admin", "127.0.0.1 is not a public address"},
		{"name resolving to loopback", fmt.Sprintf("http://intranet.example:%d/admin", port), "intranet.example resolves to 127.0.0.1"},
		{"localhost", fmt.Sprintf("http://localhost:%d/admin", port), "localhost is this host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := redirectingSearch(t, tc.location, 0)
			w := webSearch(t, srv.URL, func(c *tools.Config) { c.MCPResolver = resolver{} })
			_, err := w.Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
			if !errors.Is(err, tools.ErrSearchFailed) || !errors.Is(err, netguard.ErrRefused) ||
				!strings.Contains(err.Error(), "redirect was not followed") || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want a refused redirect saying %q", err, tc.message)
			}
			if n := reached.Load(); n != 0 {
				t.Fatalf("the internal server got %d requests", n)
			}
		})
	}
	t.Run("allowed by ALICIA_MCP_ALLOWED_HOSTS", func(t *testing.T) {
		srv, _ := redirectingSearch(t, internal.URL+"/html/?q=golang", 0)
		w := webSearch(t, srv.URL, func(c *tools.Config) { c.MCPAllowedHosts = []string{"127.0.0.1"} })
		got, err := w.Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(hits(t, got)); n != 5 || reached.Load() != 1 {
			t.Fatalf("%d results, %d requests to the allowed server", n, reached.Load())
		}
	})
}

func TestWebSearchRedirectSchemeRefused(t *testing.T) {
	internal, reached := internalService(t)
	for _, location := range []string{"file:///etc/passwd", "gopher://" + internal.Listener.Addr().String() + "/1", "ftp://example.com/x"} {
		t.Run(location, func(t *testing.T) {
			srv, _ := redirectingSearch(t, location, 0)
			_, err := webSearch(t, srv.URL, nil).Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
			scheme, _, _ := strings.Cut(location, ":")
			if !errors.Is(err, tools.ErrSearchFailed) || !strings.Contains(err.Error(), "redirect was not followed") ||
				!strings.Contains(err.Error(), "to a "+scheme+": URL, not http(s)") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the gopher target got %d requests", n)
	}
}

func TestWebSearchRedirectCap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hops    int
		refused bool
	}{
		{"5 redirects are followed", 5, false},
		{"6 redirects are refused", 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, requests := redirectingSearch(t, "", tc.hops)
			got, err := webSearch(t, srv.URL, nil).Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				if n := len(hits(t, got)); n != 5 {
					t.Fatalf("%d results", n)
				}
				return
			}
			if !errors.Is(err, tools.ErrSearchFailed) || !strings.Contains(err.Error(), "more than 5 redirects") {
				t.Fatalf("err = %v", err)
			}
			// The first request and 5 redirects; the 6th is not followed.
			if n := requests.Load(); n != 6 {
				t.Fatalf("%d requests, want 6", n)
			}
		})
	}
}

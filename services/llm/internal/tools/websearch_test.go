package tools_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// fakeDuckDuckGo answers /html/ with a page from testdata and records the
// requests it got.
type fakeDuckDuckGo struct {
	mu       sync.Mutex
	requests []*http.Request
	status   int
	body     []byte
	hang     chan struct{}
}

func newFakeDuckDuckGo(t *testing.T, status int, page string) (*fakeDuckDuckGo, *httptest.Server) {
	t.Helper()
	f := &fakeDuckDuckGo{status: status}
	if page != "" {
		b, err := os.ReadFile("testdata/" + page)
		if err != nil {
			t.Fatal(err)
		}
		f.body = b
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Clone(r.Context()))
		hang := f.hang
		f.mu.Unlock()
		if r.URL.Path != "/html/" {
			http.NotFound(w, r)
			return
		}
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(f.status)
		_, _ = w.Write(f.body)
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeDuckDuckGo) last(t *testing.T) *http.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("no request reached the search page")
	}
	return f.requests[len(f.requests)-1]
}

func webSearch(t *testing.T, base string, mutate func(*tools.Config)) tools.Tool {
	t.Helper()
	cfg := tools.DefaultConfig()
	cfg.WebSearchURL = base
	if mutate != nil {
		mutate(&cfg)
	}
	w, err := tools.NewWebSearch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type hit struct{ title, url, snippet string }

func hits(t *testing.T, v any) []hit {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("result is %T, want a map", v)
	}
	var out []hit
	for _, r := range m["results"].([]any) {
		r := r.(map[string]any)
		out = append(out, hit{r["title"].(string), r["url"].(string), r["snippet"].(string)})
	}
	return out
}

func TestWebSearchResults(t *testing.T) {
	f, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_results.html")
	all := []hit{
		{"Documentation - The Go Programming Language", "https://go.dev/doc/", "The Go programming language is an open source project to make programmers more productive."},
		{"Go (programming language) - Wikipedia", "https://en.wikipedia.org/wiki/Go_(programming_language)", "Go is a high-level general purpose programming language that is statically typed and compiled."},
		{"Example & Co — Résumé", "https://example.org/search?a=1&b=%C3%A9t%C3%A9", "Snippet with an entity & an accent: été."},
		{"Go Packages", "https://pkg.go.dev/", "Search Go packages."},
		{"A Tour of Go", "https://go.dev/tour/", "An interactive introduction to Go."},
		{"Go by Example", "https://gobyexample.com/", "Hands-on introduction to Go using annotated example programs."},
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want []hit
	}{
		// The ad, the duplicate and the javascript: link are left out.
		{"default limit is 5", map[string]any{"query": "golang"}, all[:5]},
		{"limit", map[string]any{"query": "golang", "limit": 2.0}, all[:2]},
		{"limit above the page's results", map[string]any{"query": "golang", "limit": 10.0}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webSearch(t, srv.URL, nil).Call(testContext(t), tools.Invocation{}, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if q := got.(map[string]any)["query"]; q != "golang" {
				t.Fatalf("query = %v", q)
			}
			if h := hits(t, got); !reflect.DeepEqual(h, tc.want) {
				t.Fatalf("results:\n got %q\nwant %q", h, tc.want)
			}
		})
	}
	req := f.last(t)
	if req.Method != http.MethodGet || req.URL.Query().Get("q") != "golang" {
		t.Fatalf("request %s %s, want GET /html/?q=golang", req.Method, req.URL)
	}
	if ua := req.Header.Get("User-Agent"); ua != tools.DefaultUserAgent {
		t.Fatalf("User-Agent = %q", ua)
	}
}

func TestWebSearchRequest(t *testing.T) {
	f, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_empty.html")
	w := webSearch(t, srv.URL+"/", func(c *tools.Config) {
		c.WebSearchRegion = "fr-fr"
		c.WebSearchUserAgent = "test-agent/1"
	})
	if _, err := w.Call(testContext(t), tools.Invocation{}, map[string]any{"query": "  café & croissants?  "}); err != nil {
		t.Fatal(err)
	}
	req := f.last(t)
	q := req.URL.Query()
	if q.Get("q") != "café & croissants?" || q.Get("kl") != "fr-fr" || req.Header.Get("User-Agent") != "test-agent/1" {
		t.Fatalf("request %s with User-Agent %q", req.URL, req.Header.Get("User-Agent"))
	}
}

func TestWebSearchEmptyPage(t *testing.T) {
	_, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_empty.html")
	got, err := webSearch(t, srv.URL, nil).Call(testContext(t), tools.Invocation{}, map[string]any{"query": "zzqxjv"})
	if err != nil {
		t.Fatal(err)
	}
	results := got.(map[string]any)["results"].([]any)
	if results == nil || len(results) != 0 {
		t.Fatalf("results = %#v, want an empty list", results)
	}
}

func TestWebSearchFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		page    string
		message string
	}{
		{"server error", http.StatusInternalServerError, "ddg_empty.html", "DuckDuckGo answered HTTP 500"},
		{"rate limited", http.StatusAccepted, "ddg_captcha.html", "refused the search (HTTP 202)"},
		{"captcha with 200", http.StatusOK, "ddg_captcha.html", "asked for a CAPTCHA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newFakeDuckDuckGo(t, tc.status, tc.page)
			_, err := webSearch(t, srv.URL, nil).Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
			if !errors.Is(err, tools.ErrSearchFailed) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want ErrSearchFailed saying %q", err, tc.message)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		_, err := webSearch(t, "http://127.0.0.1:1", nil).Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
		if !errors.Is(err, tools.ErrSearchFailed) || !strings.Contains(err.Error(), "could not be reached") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("slow answer", func(t *testing.T) {
		f, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_results.html")
		f.hang = make(chan struct{})
		defer close(f.hang)
		w := webSearch(t, srv.URL, func(c *tools.Config) { c.WebSearchTimeout = 100 * time.Millisecond })
		start := time.Now()
		_, err := w.Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
		if !errors.Is(err, tools.ErrSearchFailed) || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %s", d)
		}
	})
}

// A page is read up to the size cap only: results past it are not seen.
func TestWebSearchBodyCap(t *testing.T) {
	f, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_results.html")
	page := f.body
	f.body = append([]byte("<html><body><!--"+strings.Repeat("x", 64<<10)+"-->"), page...)
	for _, tc := range []struct {
		name     string
		maxBytes int
		want     int
	}{
		{"results past the cap", 32 << 10, 0},
		{"results within the cap", 1 << 20, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := webSearch(t, srv.URL, func(c *tools.Config) { c.WebSearchMaxBytes = tc.maxBytes })
			got, err := w.Call(testContext(t), tools.Invocation{}, map[string]any{"query": "golang"})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(hits(t, got)); n != tc.want {
				t.Fatalf("%d results, want %d", n, tc.want)
			}
		})
	}
}

func TestWebSearchArguments(t *testing.T) {
	_, srv := newFakeDuckDuckGo(t, http.StatusOK, "ddg_results.html")
	w := webSearch(t, srv.URL, nil)
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"no query", map[string]any{}},
		{"blank query", map[string]any{"query": "  "}},
		{"limit too high", map[string]any{"query": "go", "limit": 11.0}},
		{"limit not whole", map[string]any{"query": "go", "limit": 2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := w.Call(testContext(t), tools.Invocation{}, tc.args); !errors.Is(err, tools.ErrInvalidParameters) {
				t.Fatalf("err = %v, want ErrInvalidParameters", err)
			}
		})
	}
}

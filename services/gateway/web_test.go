package gateway_test

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/gateway/web"
)

// TestWebClientRoutes: the embedded client answers client routes with
// index.html; the API's unknown routes keep their JSON 404 and the probes
// and metrics their own answers; every answer has the security headers.
func TestWebClientRoutes(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.LiveKit = gateway.LiveKit{URL: "ws://livekit:7880", PublicURL: "wss://voice.example.com", APIKey: "devkey",
				APISecret: strings.Repeat("s", 32), TokenTTL: time.Hour}
		}
	})
	for _, c := range []struct {
		name, path, key string
		status          int
		contentType     string // prefix
	}{
		{"root", "/", "", 200, "text/html"},
		{"client route", "/c/ac_123", "", 200, "text/html"},
		{"client route, memories", "/memories", "", 200, "text/html"},
		{"unknown api route", "/v1/nothing-here", aliceKey, 404, "application/json"},
		{"unknown api route without key", "/v1/nothing-here", "", 401, "application/json"},
		{"api", "/v1/conversations", aliceKey, 200, "application/json"},
		{"api without key", "/v1/conversations", "", 401, "application/json"},
		{"healthz", "/healthz", "", 200, "text/plain"},
		{"readyz", "/readyz", "", 200, "text/plain"},
		{"metrics", "/metrics", "", 200, "text/plain"},
		{"missing asset", "/assets/missing-0000.js", "", 404, "application/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.call(t, c.key, "GET", c.path, nil)
			if r.status != c.status || !strings.HasPrefix(r.header.Get("Content-Type"), c.contentType) {
				t.Fatalf("GET %s = %d %s %q", c.path, r.status, r.header.Get("Content-Type"), r.body)
			}
			if c.contentType != "text/html" && strings.Contains(string(r.body), "<title>") {
				t.Fatalf("GET %s answered with the client: %s", c.path, r.body)
			}
			if c.status >= 400 {
				r.wantError(c.status)
			}
			for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
				if got := r.header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			csp := r.header.Get("Content-Security-Policy")
			if c.contentType == "text/html" {
				if !strings.Contains(csp, "connect-src 'self' wss://voice.example.com https://voice.example.com;") ||
					!strings.Contains(csp, "frame-ancestors 'none'") {
					t.Errorf("CSP %q", csp)
				}
			} else if csp != "" {
				t.Errorf("CSP on %s: %q", c.contentType, csp)
			}
		})
	}
	// HEAD of a probe is not the client either.
	req, _ := http.NewRequest(http.MethodHead, s.base+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HEAD /healthz answered with the client (%d)", resp.StatusCode)
	}
}

// TestWebClientInstallable: the committed build's manifest, icons and
// service worker are served as themselves (never the SPA fallback's
// index.html) with their MIME types and revalidated on every use, the
// client's HTML links them, its CSP lets the page register the worker and
// read the manifest, and every file the worker precaches is there.
func TestWebClientInstallable(t *testing.T) {
	dist, err := fs.Sub(web.Dist, "dist")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(dist, "sw.js"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the embedded build has no sw.js: %v", err)
		}
		t.Skip("the embedded build predates the service worker: run npm run build in services/gateway/web")
	}
	s := newStack(t)
	get := func(t *testing.T, path, contentType string) reply {
		t.Helper()
		r := s.call(t, "", "GET", path, nil)
		if r.status != 200 || r.header.Get("Content-Type") != contentType {
			t.Fatalf("GET %s = %d %q, want 200 %q", path, r.status, r.header.Get("Content-Type"), contentType)
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", path, cc)
		}
		if r.header.Get("Content-Security-Policy") != "" || strings.Contains(string(r.body), "<title>") {
			t.Fatalf("GET %s answered with the client's HTML", path)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
		return r
	}

	sw := get(t, "/sw.js", "text/javascript; charset=utf-8")
	if !strings.Contains(string(sw.body), "addEventListener(`fetch`") && !strings.Contains(string(sw.body), `addEventListener("fetch"`) {
		t.Errorf("/sw.js has no fetch handler: %.200s", sw.body)
	}
	manifest := get(t, "/manifest.webmanifest", "application/manifest+json")
	var m struct {
		Name, StartURL, Scope, Display string
		Icons                          []struct{ Src, Sizes, Type, Purpose string }
	}
	if err := json.Unmarshal(manifest.body, &m); err != nil {
		t.Fatalf("manifest: %v: %s", err, manifest.body)
	}
	if m.Name != "Alicia" || m.Display != "standalone" || len(m.Icons) < 3 {
		t.Fatalf("manifest %+v", m)
	}
	for _, icon := range m.Icons {
		get(t, icon.Src, icon.Type)
	}
	get(t, "/apple-touch-icon.png", "image/png")
	// HEAD as well (a browser's update check of the worker may be one).
	req, _ := http.NewRequest(http.MethodHead, s.base+"/sw.js", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("HEAD /sw.js = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	index := s.call(t, "", "GET", "/", nil)
	for _, link := range []string{`<link rel="manifest" href="/manifest.webmanifest"`, `<link rel="apple-touch-icon" href="/apple-touch-icon.png"`, `<meta name="theme-color"`} {
		if !strings.Contains(string(index.body), link) {
			t.Errorf("index.html lacks %s", link)
		}
	}
	csp := index.header.Get("Content-Security-Policy")
	// script-src allows compiling WebAssembly (the in-page VAD) and nothing else.
	for _, d := range []string{"worker-src 'self'", "manifest-src 'self'", "default-src 'self'", "script-src 'self' 'wasm-unsafe-eval';"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %s", csp, d)
		}
	}

	// The precache list the build wrote into sw.js: every file is served
	// (an install fails whole on one 404), and nothing the gateway owns.
	list := regexp.MustCompile(`"urls":(\[[^\]]*\])`).FindSubmatch(sw.body)
	if list == nil {
		t.Fatalf("no precache list in /sw.js: %.300s", sw.body)
	}
	var urls []string
	if err := json.Unmarshal(list[1], &urls); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(urls, "/index.html") || !slices.Contains(urls, "/manifest.webmanifest") || slices.Contains(urls, "/sw.js") {
		t.Fatalf("precache %v", urls)
	}
	for _, u := range urls {
		for _, owned := range []string{"/v1", "/healthz", "/readyz", "/metrics"} {
			if u == owned || strings.HasPrefix(u, owned+"/") {
				t.Fatalf("precache lists %s", u)
			}
		}
		r := s.call(t, "", "GET", u, nil)
		if r.status != 200 {
			t.Errorf("precached %s: %d", u, r.status)
		}
		if html := strings.HasPrefix(r.header.Get("Content-Type"), "text/html"); html != (u == "/index.html") {
			t.Errorf("precached %s served as %s", u, r.header.Get("Content-Type"))
		}
	}

	// The in-page VAD's runtime and model are files of the build (too big to
	// precache), served as themselves: nothing is fetched from elsewhere.
	for ext, ctype := range map[string]string{".wasm": "application/wasm", ".onnx": "application/octet-stream"} {
		files, err := fs.Glob(web.Dist, "dist/assets/*"+ext)
		if err != nil || len(files) != 1 {
			t.Fatalf("dist/assets/*%s: %v %v (npm run build copies the VAD's files)", ext, files, err)
		}
		u := strings.TrimPrefix(files[0], "dist")
		if r := s.call(t, "", "HEAD", u, nil); r.status != 200 || r.header.Get("Content-Type") != ctype {
			t.Errorf("HEAD %s: %d %q, want 200 %s", u, r.status, r.header.Get("Content-Type"), ctype)
		}
	}
}

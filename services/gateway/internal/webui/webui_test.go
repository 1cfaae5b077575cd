package webui_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/webui"
	"github.com/alicia-voice/alicia/services/gateway/web"
)

var (
	indexHTML = "<!doctype html><title>Alicia</title><script type=module src=/assets/index-abc123.js></script>" + strings.Repeat("<!-- padding -->", 40)
	appJS     = "console.log('alicia');" + strings.Repeat("export const x = 1;\n", 200)
	swJS      = "self.addEventListener('fetch', () => {});" + strings.Repeat("// cache\n", 100)
	pngBytes  = "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 500)
	// bigWasm is past the size loaded at start and gzipped at the fast level.
	bigWasm = "\x00asm\x01\x00\x00\x00" + strings.Repeat("\x20\x00\x41\x01\x6a\x0b", 400_000)
)

func build() fstest.MapFS {
	return fstest.MapFS{
		"index.html":              {Data: []byte(indexHTML)},
		"sw.js":                   {Data: []byte(swJS)},
		"manifest.webmanifest":    {Data: []byte(`{"name":"Alicia","start_url":"/"}`)},
		"favicon.svg":             {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
		"icon-192.png":            {Data: []byte(pngBytes)},
		"assets/index-abc123.js":  {Data: []byte(appJS)},
		"assets/index-def456.css": {Data: []byte("body{margin:0}" + strings.Repeat(".a{color:red}", 100))},
		"assets/vad-0a1b2c.wasm":  {Data: []byte("\x00asm\x01\x00\x00\x00" + strings.Repeat("\x00\x01", 300))},
		"assets/inter-9f8e.woff2": {Data: []byte("wOF2" + strings.Repeat("\xff", 100))},
		"assets/ort-77aa.wasm":    {Data: []byte(bigWasm)},
	}
}

// serve runs a request through an echo server with h on GET and HEAD of
// every path, as the gateway registers it.
func serve(t *testing.T, h *webui.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	e := echo.New()
	e.GET("/*", h.Serve)
	e.HEAD("/*", h.Serve)
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func newHandler(t *testing.T, opts webui.Options) *webui.Handler {
	t.Helper()
	h, err := webui.New(build(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestFiles(t *testing.T) {
	h := newHandler(t, webui.Options{Reserved: []string{"/v1", "/healthz", "/readyz", "/metrics"}})
	for _, c := range []struct {
		name, path   string
		status       int
		contentType  string
		cacheControl string
		body         string
	}{
		{"root", "/", 200, "text/html; charset=utf-8", webui.Revalidate, indexHTML},
		{"index", "/index.html", 200, "text/html; charset=utf-8", webui.Revalidate, indexHTML},
		{"service worker", "/sw.js", 200, "text/javascript; charset=utf-8", webui.Revalidate, swJS},
		{"manifest", "/manifest.webmanifest", 200, "application/manifest+json", webui.Revalidate, `{"name":"Alicia","start_url":"/"}`},
		{"icon", "/icon-192.png", 200, "image/png", webui.Revalidate, pngBytes},
		{"svg", "/favicon.svg", 200, "image/svg+xml", webui.Revalidate, `<svg xmlns="http://www.w3.org/2000/svg"/>`},
		{"hashed js", "/assets/index-abc123.js", 200, "text/javascript; charset=utf-8", webui.Immutable, appJS},
		{"hashed css", "/assets/index-def456.css", 200, "text/css; charset=utf-8", webui.Immutable, ""},
		{"wasm", "/assets/vad-0a1b2c.wasm", 200, "application/wasm", webui.Immutable, ""},
		{"font", "/assets/inter-9f8e.woff2", 200, "font/woff2", webui.Immutable, ""},
		{"client route", "/c/ac_123", 200, "text/html; charset=utf-8", webui.Revalidate, indexHTML},
		{"client route, trailing slash", "/memories/", 200, "text/html; charset=utf-8", webui.Revalidate, indexHTML},
		{"directory", "/assets", 200, "text/html; charset=utf-8", webui.Revalidate, indexHTML},
		{"dot segments", "/assets/../sw.js", 200, "text/javascript; charset=utf-8", webui.Revalidate, swJS},
		{"missing asset", "/assets/index-old999.js", 404, "", "", ""},
		{"missing file", "/robots.txt", 404, "", "", ""},
		{"api", "/v1/unknown", 404, "", "", ""},
		{"api root", "/v1", 404, "", "", ""},
		{"probe", "/healthz", 404, "", "", ""},
		{"metrics", "/metrics", 404, "", "", ""},
		{"under a probe", "/readyz/x", 404, "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := serve(t, h, "GET", c.path, nil)
			if rec.Code != c.status {
				t.Fatalf("GET %s = %d, want %d", c.path, rec.Code, c.status)
			}
			if c.status != 200 {
				if strings.Contains(rec.Body.String(), "<title>") {
					t.Fatalf("GET %s answered with index.html", c.path)
				}
				return
			}
			if got := rec.Header().Get("Content-Type"); got != c.contentType {
				t.Errorf("Content-Type %q, want %q", got, c.contentType)
			}
			if got := rec.Header().Get("Cache-Control"); got != c.cacheControl {
				t.Errorf("Cache-Control %q, want %q", got, c.cacheControl)
			}
			if c.body != "" && rec.Body.String() != c.body {
				t.Errorf("body %q, want %q", rec.Body.String(), c.body)
			}
			etag := rec.Header().Get("ETag")
			if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
				t.Errorf("ETag %q is not a strong one", etag)
			}
			csp := rec.Header().Get("Content-Security-Policy")
			if html := strings.HasPrefix(c.contentType, "text/html"); html != (csp != "") {
				t.Errorf("CSP %q on %s", csp, c.contentType)
			}
		})
	}
}

// TestNoFallbackForWebAppFiles: the service worker and the manifest are
// files, never a client route: present, they are served as themselves (see
// TestFiles); absent (a build without them), they are a 404, not
// index.html, which a browser would try to run as the worker or read as
// the manifest.
func TestNoFallbackForWebAppFiles(t *testing.T) {
	fsys := build()
	delete(fsys, "sw.js")
	delete(fsys, "manifest.webmanifest")
	h, err := webui.New(fsys, webui.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/sw.js", "/manifest.webmanifest", "/icon-512.png", "/apple-touch-icon.png"} {
		for _, method := range []string{"GET", "HEAD"} {
			rec := serve(t, h, method, p, nil)
			if rec.Code != 404 || strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || rec.Header().Get("Content-Security-Policy") != "" {
				t.Errorf("%s %s without the file: %d %q", method, p, rec.Code, rec.Header().Get("Content-Type"))
			}
		}
	}
	// Present, the manifest has its own type and is revalidated.
	rec := serve(t, newHandler(t, webui.Options{}), "GET", "/manifest.webmanifest", map[string]string{"Accept-Encoding": "gzip"})
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/manifest+json" || rec.Header().Get("Cache-Control") != webui.Revalidate {
		t.Fatalf("manifest: %d %v", rec.Code, rec.Header())
	}
}

func TestGzip(t *testing.T) {
	h := newHandler(t, webui.Options{})
	for _, c := range []struct {
		path, file string
		gzipped    bool
	}{
		{"/assets/index-abc123.js", appJS, true},
		{"/", indexHTML, true},
		{"/c/ac_1", indexHTML, true},
		{"/assets/vad-0a1b2c.wasm", "", true},
		{"/assets/ort-77aa.wasm", bigWasm, true},
		{"/icon-192.png", pngBytes, false},                                   // images are compressed already
		{"/favicon.svg", `<svg xmlns="http://www.w3.org/2000/svg"/>`, false}, // not smaller gzipped
	} {
		t.Run(c.path, func(t *testing.T) {
			rec := serve(t, h, "GET", c.path, map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
			if rec.Code != 200 {
				t.Fatalf("status %d", rec.Code)
			}
			if got := rec.Header().Get("Content-Encoding") == "gzip"; got != c.gzipped {
				t.Fatalf("gzipped = %v, want %v", got, c.gzipped)
			}
			if !c.gzipped {
				return
			}
			if !strings.Contains(rec.Header().Get("Vary"), "Accept-Encoding") {
				t.Errorf("Vary %q", rec.Header().Get("Vary"))
			}
			zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if c.file != "" && string(plain) != c.file {
				t.Fatalf("decoded %d bytes, not the file", len(plain))
			}
			if rec.Body.Len() >= len(plain) {
				t.Fatalf("gzip %d bytes, file %d", rec.Body.Len(), len(plain))
			}
			// The plain file has another ETag than its gzip.
			plainRec := serve(t, h, "GET", c.path, nil)
			if plainRec.Header().Get("Content-Encoding") != "" || !bytes.Equal(plainRec.Body.Bytes(), plain) {
				t.Fatalf("without Accept-Encoding: encoding %q, %d bytes", plainRec.Header().Get("Content-Encoding"), plainRec.Body.Len())
			}
			if plainRec.Header().Get("ETag") == rec.Header().Get("ETag") {
				t.Fatalf("the gzip and the file share the ETag %s", rec.Header().Get("ETag"))
			}
		})
	}
	for _, ae := range []string{"", "identity", "gzip;q=0", "br", "*;q=0", "gzip;q=0, *"} {
		if rec := serve(t, h, "GET", "/assets/index-abc123.js", map[string]string{"Accept-Encoding": ae}); rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q got %q", ae, rec.Header().Get("Content-Encoding"))
		}
	}
	for _, ae := range []string{"gzip", "GZIP", "deflate, gzip", "*", "x-gzip"} {
		if rec := serve(t, h, "GET", "/assets/index-abc123.js", map[string]string{"Accept-Encoding": ae}); rec.Header().Get("Content-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q not gzipped", ae)
		}
	}
	// A range is of the plain file.
	rec := serve(t, h, "GET", "/assets/index-abc123.js", map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-6"})
	if rec.Code != http.StatusPartialContent || rec.Body.String() != appJS[:7] || rec.Header().Get("Content-Encoding") != "" {
		t.Fatalf("range: %d %q %q", rec.Code, rec.Body.String(), rec.Header().Get("Content-Encoding"))
	}
}

func TestConditionalAndHead(t *testing.T) {
	h := newHandler(t, webui.Options{})
	for _, enc := range []string{"", "gzip"} {
		t.Run("encoding "+enc, func(t *testing.T) {
			hdr := map[string]string{"Accept-Encoding": enc}
			first := serve(t, h, "GET", "/assets/index-abc123.js", hdr)
			etag := first.Header().Get("ETag")
			hdr["If-None-Match"] = etag
			rec := serve(t, h, "GET", "/assets/index-abc123.js", hdr)
			if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 || rec.Header().Get("ETag") != etag ||
				rec.Header().Get("Cache-Control") != webui.Immutable {
				t.Fatalf("If-None-Match %s: %d, %d bytes, headers %v", etag, rec.Code, rec.Body.Len(), rec.Header())
			}
			hdr["If-None-Match"] = `"something-else"`
			if rec := serve(t, h, "GET", "/assets/index-abc123.js", hdr); rec.Code != http.StatusOK {
				t.Fatalf("another ETag: %d", rec.Code)
			}
		})
	}
	// The client routes share index.html's ETag.
	index := serve(t, h, "GET", "/", nil).Header().Get("ETag")
	if rec := serve(t, h, "GET", "/memories", map[string]string{"If-None-Match": index}); rec.Code != http.StatusNotModified {
		t.Fatalf("client route with index.html's ETag: %d", rec.Code)
	}

	for _, p := range []string{"/", "/assets/index-abc123.js", "/c/ac_1"} {
		get := serve(t, h, "GET", p, nil)
		head := serve(t, h, "HEAD", p, nil)
		if head.Code != 200 || head.Body.Len() != 0 || head.Header().Get("Content-Length") != get.Header().Get("Content-Length") ||
			head.Header().Get("ETag") != get.Header().Get("ETag") || head.Header().Get("Content-Type") != get.Header().Get("Content-Type") {
			t.Errorf("HEAD %s: %d, %d bytes, %v (GET: %v)", p, head.Code, head.Body.Len(), head.Header(), get.Header())
		}
	}
	if rec := serve(t, h, "HEAD", "/assets/missing.js", nil); rec.Code != 404 {
		t.Errorf("HEAD of a missing file: %d", rec.Code)
	}
}

func TestContentSecurityPolicy(t *testing.T) {
	base := "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data: blob:; " +
		"media-src 'self' blob:; connect-src 'self'%s; worker-src 'self' blob:; manifest-src 'self'; font-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	for _, c := range []struct{ url, extra string }{
		{"", ""},
		{"ws://192.168.1.20:7880", " ws://192.168.1.20:7880 http://192.168.1.20:7880"},
		{"wss://Voice.Example.com", " wss://voice.example.com https://voice.example.com"},
		{"https://voice.example.com/rtc", " wss://voice.example.com https://voice.example.com"},
		{"http://lk:7880", " ws://lk:7880 http://lk:7880"},
		{"not a url", ""},
	} {
		t.Run(c.url, func(t *testing.T) {
			h := newHandler(t, webui.Options{LiveKitURL: c.url})
			got := serve(t, h, "GET", "/c/ac_1", nil).Header().Get("Content-Security-Policy")
			if want := strings.Replace(base, "%s", c.extra, 1); got != want {
				t.Fatalf("CSP\n got %s\nwant %s", got, want)
			}
			if got := serve(t, h, "GET", "/assets/index-abc123.js", nil).Header().Get("Content-Security-Policy"); got != "" {
				t.Fatalf("CSP on a script: %s", got)
			}
		})
	}
}

// TestEmbeddedDist: the build the gateway embeds has an index.html the
// handler serves.
func TestEmbeddedDist(t *testing.T) {
	dist, err := fs.Sub(web.Dist, "dist")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(dist, "index.html"); err != nil {
		t.Fatalf("web.Dist has no dist/index.html: %v", err)
	}
	h, err := webui.New(dist, webui.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(t, h, "GET", "/", nil)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// TestWarm: warming gzips the large files in the background; warming
// cancelled keeps nothing half-done, and the file is still served whole
// and gzipped (the request compresses it).
func TestWarm(t *testing.T) {
	h := newHandler(t, webui.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h.Warm(ctx)
	rec := serve(t, h, "GET", "/assets/ort-77aa.wasm", map[string]string{"Accept-Encoding": "gzip"})
	if rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("not gzipped after a cancelled warm: %q", rec.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || string(plain) != bigWasm {
		t.Fatalf("decoded %d bytes (err %v), not the file", len(plain), err)
	}
	h.Warm(t.Context()) // done already: returns at once
}

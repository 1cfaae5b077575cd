// Package webui serves the web client's build (the embedded web.Dist) at
// every path the API and the probes do not own: each file with its MIME
// type, gzipped once per process and kept in memory, with a strong ETag; Vite's
// content-hashed assets cached for a year, everything else revalidated;
// index.html for client routes (history-API fallback), with a
// Content-Security-Policy.
package webui

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Cache-Control values.
const (
	// Immutable is for assets/: Vite names them by content hash, so a
	// changed file is a new URL.
	Immutable = "public, max-age=31536000, immutable"
	// Revalidate is for everything else (index.html, sw.js,
	// manifest.webmanifest, icons): their URLs stay the same across
	// releases, so the browser asks each time (a 304 while unchanged).
	Revalidate = "no-cache"
)

// Options of a Handler.
type Options struct {
	// LiveKitURL is the LiveKit server browsers join (ws(s):// or
	// http(s)://); its origins are added to the CSP's connect-src. Empty:
	// none.
	LiveKitURL string
	// Reserved are the paths that belong to other handlers: neither
	// served nor answered with index.html, even when routing sends them
	// here (e.g. a HEAD of /healthz). Each is the path itself or a prefix
	// followed by "/".
	Reserved []string
}

// Handler serves an immutable file system.
type Handler struct {
	fsys     fs.FS
	files    map[string]*file // by path without the leading slash
	csp      string
	reserved []string
}

// file is one file of the build; its bytes are loaded on the first request
// and kept (the file system never changes), its gzip too (gzipOf).
type file struct {
	name         string
	contentType  string
	cacheControl string
	compressible bool

	once sync.Once
	err  error
	data []byte
	tag  string // of the bytes
	etag string
}

// New indexes fsys (the root of the build, where index.html is).
func New(fsys fs.FS, opts Options) (*Handler, error) {
	h := &Handler{fsys: fsys, files: map[string]*file{}, csp: ContentSecurityPolicy(opts.LiveKitURL), reserved: opts.Reserved}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		typ := contentType(name)
		h.files[name] = &file{name: name, contentType: typ, cacheControl: cacheControl(name), compressible: compressible(typ)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	return h, nil
}

// Warm loads the large files and their gzip, largest first, until ctx ends
// (the server runs it in the background from its start), so the first
// browser that needs one (the VAD's WebAssembly, 14 MB) does not wait for
// its compression. The gzip is kept per process (gzips): done once however
// many handlers serve the same build. Cancelled, it stops within a chunk
// and keeps nothing half-done.
func (h *Handler) Warm(ctx context.Context) {
	var big []*file
	sizes := map[*file]int64{}
	for _, f := range h.files {
		if info, err := fs.Stat(h.fsys, f.name); err == nil && info.Size() >= warmFrom {
			big = append(big, f)
			sizes[f] = info.Size()
		}
	}
	slices.SortFunc(big, func(a, b *file) int { return cmp.Compare(sizes[b], sizes[a]) })
	for _, f := range big {
		if ctx.Err() != nil {
			return
		}
		if f.load(h.fsys) == nil {
			f.gzip(ctx)
		}
	}
}

// warmFrom: files from this size are loaded at start (warm); fastFrom:
// from this size they are gzipped at the fastest level (a tenth of the
// best level's time for a fifth more bytes, once per release in a
// browser's cache).
const (
	warmFrom = 256 << 10
	fastFrom = 1 << 20
)

// gzips are the gzip of each file's bytes by their ETag: every handler of
// the process compresses a file once.
var gzips sync.Map // etag → *gzipped

type gzipped struct {
	mu   sync.Mutex
	done bool
	gz   []byte // nil when gzip does not make it smaller
}

// gzipChunk is how much is compressed between looks at the context.
const gzipChunk = 256 << 10

// gzipOf is data's gzip (nil when it is not smaller), compressed once per
// process; nil and nothing kept when ctx ends first.
func gzipOf(ctx context.Context, tag string, data []byte) []byte {
	v, _ := gzips.LoadOrStore(tag, &gzipped{})
	g := v.(*gzipped)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return g.gz
	}
	level := gzip.BestCompression
	if len(data) >= fastFrom {
		level = gzip.BestSpeed
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, level) // a valid level: no error
	for rest := data; len(rest) > 0; {
		if ctx.Err() != nil {
			return nil
		}
		n := min(len(rest), gzipChunk)
		if _, err := zw.Write(rest[:n]); err != nil {
			return nil
		}
		rest = rest[n:]
	}
	if err := zw.Close(); err != nil {
		return nil
	}
	g.done = true
	if b.Len() < len(data) {
		g.gz = b.Bytes()
	}
	return g.gz
}

// Serve is the echo handler for GET and HEAD of every path not reserved.
// A missing file is echo.ErrNotFound (the server's error handler answers).
func (h *Handler) Serve(c echo.Context) error {
	r := c.Request()
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") || h.isReserved(path.Clean(p)) {
		return echo.ErrNotFound
	}
	name := strings.TrimPrefix(path.Clean(p), "/")
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		// A client route (/c/ac_1, /memories) has no extension: the
		// client renders it. A missing file keeps its 404, so a stale
		// chunk fails as one instead of as HTML.
		if path.Ext(name) != "" {
			return echo.ErrNotFound
		}
		if f, ok = h.files["index.html"]; !ok {
			return echo.ErrNotFound
		}
	}
	return h.serveFile(c, f)
}

func (h *Handler) isReserved(p string) bool {
	for _, r := range h.reserved {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func (h *Handler) serveFile(c echo.Context, f *file) error {
	if err := f.load(h.fsys); err != nil {
		return fmt.Errorf("webui: %s: %w", f.name, err)
	}
	r, hdr := c.Request(), c.Response().Header()
	body, etag := f.data, f.etag
	if f.compressible {
		hdr.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
		// A range is of the bytes sent: keep ranges on the plain file.
		if r.Header.Get("Range") == "" && acceptsGzip(r.Header.Get(echo.HeaderAcceptEncoding)) {
			if gz := f.gzip(r.Context()); gz != nil {
				// A strong ETag names the bytes: the gzip has its own.
				body, etag = gz, `"`+f.tag+`-gz"`
				hdr.Set(echo.HeaderContentEncoding, "gzip")
			}
		}
	}
	hdr.Set(echo.HeaderContentType, f.contentType)
	hdr.Set("Cache-Control", f.cacheControl)
	hdr.Set("ETag", etag)
	if strings.HasPrefix(f.contentType, "text/html") {
		hdr.Set(echo.HeaderContentSecurityPolicy, h.csp)
	}
	// ServeContent answers If-None-Match (304), HEAD and ranges.
	http.ServeContent(c.Response(), r, "", time.Time{}, bytes.NewReader(body))
	return nil
}

// load reads the file and its ETag once.
func (f *file) load(fsys fs.FS) error {
	f.once.Do(func() {
		f.data, f.err = fs.ReadFile(fsys, f.name)
		if f.err != nil {
			return
		}
		sum := sha256.Sum256(f.data)
		f.tag = base64.RawURLEncoding.EncodeToString(sum[:18])
		f.etag = `"` + f.tag + `"`
	})
	return f.err
}

// gzip is the loaded file's gzip (nil: not compressible, not smaller, or
// ctx ended first).
func (f *file) gzip(ctx context.Context) []byte {
	if !f.compressible {
		return nil
	}
	return gzipOf(ctx, f.tag, f.data)
}

// acceptsGzip reads Accept-Encoding: gzip (or *) with a non-zero q.
func acceptsGzip(header string) bool {
	gz, star := -1.0, -1.0
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		q := 1.0
		for param := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(param), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				var parsed float64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%g", &parsed); err == nil {
					q = parsed
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			gz = q
		case "*":
			star = q
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}

// types are the MIME types of the build's files, fixed here rather than
// read from the host's mime.types: with nosniff, a wrong one breaks the
// file.
var types = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".wasm":        "application/wasm",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".webp":        "image/webp",
	".avif":        "image/avif",
	".ico":         "image/x-icon",
	".woff2":       "font/woff2",
	".woff":        "font/woff",
	".txt":         "text/plain; charset=utf-8",
	".xml":         "application/xml",
	".onnx":        "application/octet-stream",
}

func contentType(name string) string {
	if t, ok := types[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

// compressible types are text or text-like; images and fonts already are
// compressed.
func compressible(typ string) bool {
	typ, _, _ = strings.Cut(typ, ";")
	switch typ {
	case "application/json", "application/manifest+json", "application/wasm", "application/xml", "image/svg+xml", "image/x-icon":
		return true
	}
	return strings.HasPrefix(typ, "text/")
}

func cacheControl(name string) string {
	if strings.HasPrefix(name, "assets/") {
		return Immutable
	}
	return Revalidate
}

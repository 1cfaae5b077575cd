package jaeger

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The trace viewer Start serves unless Options.UIAssets names another UI:
// index.html and static/ (one stylesheet, one JavaScript module), no
// framework and nothing fetched from elsewhere. It reads Jaeger's query API
// from the page's origin (/api/services, /api/traces, /api/traces/{id}).
//
// Jaeger's query service serves such a directory this way
// (cmd/query/app/static_handler.go in the module): /static/… from the
// directory's static/, and index.html for every other path that is not its
// API, after rewriting in it `<base href="/"` (when a base path is
// configured), `JAEGER_VERSION = DEFAULT_VERSION;`,
// `JAEGER_STORAGE_CAPABILITIES = DEFAULT_STORAGE_CAPABILITIES;` and
// `JAEGER_CONFIG = DEFAULT_CONFIG;`. The viewer's page keeps `<base href="/"`
// and resolves every URL against it, and reads the version from the
// rewritten JAEGER_VERSION.
//
//go:embed ui
var uiFiles embed.FS

// UI returns the files of the embedded trace viewer: index.html,
// static/trace-viewer.css and static/trace-viewer.js.
func UI() fs.FS {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the directory is embedded
	}
	return sub
}

// WriteUI writes the embedded trace viewer into dir, which then holds it
// alone: what dir held before is replaced (a viewer of another version
// among them).
func WriteUI(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("jaeger: UI: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+"-")
	if err != nil {
		return fmt.Errorf("jaeger: UI: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("jaeger: UI: %w", err)
	}
	if err := os.CopyFS(tmp, UI()); err != nil {
		return fmt.Errorf("jaeger: UI: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("jaeger: UI: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("jaeger: UI: %w", err)
	}
	return nil
}

// Command goldengen writes proto-schemas/golden/<name>.msgpack, the canonical
// MessagePack encoding of each hand-written golden/<name>.json envelope, and
// the nil vectors under golden/nil/ derived from them (see nil.go).
// It runs from `go generate ./pkg/protocol/...`.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/protocol/internal/optfields"
)

func main() {
	dir := flag.String("dir", "../../proto-schemas/golden", "golden vector directory (the schemas are in its parent)")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "goldengen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.json in %s", dir)
	}
	schemas, err := optfields.Load(os.DirFS(filepath.Dir(dir)))
	if err != nil {
		return fmt.Errorf("schemas: %w", err)
	}
	nilDir := filepath.Join(dir, "nil")
	if err := os.MkdirAll(nilDir, 0o755); err != nil {
		return err
	}
	written := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		env, err := protocol.DecodeJSON(src)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		out, err := protocol.Encode(env)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := writeIfChanged(strings.TrimSuffix(f, ".json")+".msgpack", out); err != nil {
			return err
		}
		v, err := nilVector(schemas, src)
		if err != nil {
			return fmt.Errorf("%s: nil vector: %w", f, err)
		}
		base := filepath.Join(nilDir, strings.TrimSuffix(filepath.Base(f), ".json"))
		for name, data := range map[string][]byte{
			base + ".json":        v.json,
			base + ".nil.msgpack": v.nilMsgpack,
			base + ".msgpack":     v.canonical,
		} {
			if err := writeIfChanged(name, data); err != nil {
				return err
			}
			written[name] = true
		}
	}
	// golden/nil holds nothing but generated files: drop those of vectors
	// that are gone.
	stale, err := filepath.Glob(filepath.Join(nilDir, "*"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if !written[f] && (strings.HasSuffix(f, ".json") || strings.HasSuffix(f, ".msgpack")) {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeIfChanged(name string, data []byte) error {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return os.WriteFile(name, data, 0o644)
}

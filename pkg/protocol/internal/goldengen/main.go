// Command goldengen writes proto-schemas/golden/<name>.msgpack, the canonical
// MessagePack encoding of each hand-written golden/<name>.json envelope.
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
)

func main() {
	dir := flag.String("dir", "../../proto-schemas/golden", "golden vector directory")
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
		dst := strings.TrimSuffix(f, ".json") + ".msgpack"
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, out) {
			continue
		}
		if err := os.WriteFile(dst, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

package devtools

import (
	"archive/zip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/childproc"
)

// fileProxy writes a module proxy into a directory (the layout GOPROXY=file://
// reads) that serves one module, example.com/hello@v1.0.0, whose command
// prints its -X flag, and returns the proxy's URL.
func fileProxy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "example.com", "hello", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/hello\n\ngo 1.22\n"
	files := map[string]string{
		"go.mod":            gomod,
		"cmd/hello/main.go": "package main\n\nimport \"fmt\"\n\nvar greeting = \"unset\"\n\nfunc main() { fmt.Println(greeting) }\n",
	}
	f, err := os.Create(filepath.Join(dir, "v1.0.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create("example.com/hello@v1.0.0/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"v1.0.0.mod":  gomod,
		"v1.0.0.info": `{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}`,
		"list":        "v1.0.0\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return "file://" + root
}

// TestToolBuiltOnceAndFoundAfter: a missing tool's error wraps
// ErrNotInstalled and names the step that installs it; Ensure builds it
// from its module (through the module proxy, outside any workspace, with its
// ldflags) into the cache as <name>-<version>; Find finds it afterwards and
// Ensure does not build it again.
func TestToolBuiltOnceAndFoundAfter(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("ALICIA_CACHE_DIR", cache)
	t.Setenv("GOPROXY", fileProxy(t))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Setenv("GOMODCACHE", filepath.Join(t.TempDir(), "mod"))
	tool := moduleTool(childproc.ModuleBuild{Name: "hello", Module: "example.com/hello", Version: "v1.0.0", Package: "./cmd/hello", LDFlags: "-X main.greeting=built-by-devtools"}, time.Minute)

	_, err := tool.Find()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Find of a missing tool: %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{"hello v1.0.0 is not installed", "the test task's tools step", InstallStep + " hello"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing tool's error %q lacks %q", err, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log strings.Builder
	p, built, err := tool.Ensure(ctx, &log)
	if err != nil || !built {
		t.Fatalf("Ensure: %v (built %v)\n%s", err, built, log.String())
	}
	if want := filepath.Join(cache, "bin", "hello-v1.0.0"); p != want {
		t.Fatalf("path %s, want %s", p, want)
	}
	out, err := exec.Command(p).Output()
	if err != nil || strings.TrimSpace(string(out)) != "built-by-devtools" {
		t.Fatalf("the built tool printed %q (%v): its ldflags were not applied", out, err)
	}
	if f, err := tool.Find(); err != nil || f != p {
		t.Fatalf("Find after the build: %q %v", f, err)
	}
	if _, built, err := tool.Ensure(ctx, &log); err != nil || built {
		t.Fatalf("second Ensure: built %v, %v; want the cached one", built, err)
	}
}

// TestNeedNeverBuilds: Need skips (here, without CI=true) with the sentence
// and leaves the cache as it was.
func TestNeedNeverBuilds(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("ALICIA_CACHE_DIR", cache)
	t.Setenv("CI", "")
	tool := moduleTool(childproc.ModuleBuild{Name: "absent", Module: "example.invalid/absent", Version: "v1.0.0", Package: "./cmd/absent", LDFlags: ""}, time.Minute)
	ran := false
	t.Run("need", func(t *testing.T) {
		defer func() { ran = true }()
		Need(t, tool)
		t.Error("Need returned for a missing tool")
	})
	if !ran {
		t.Fatal("the subtest did not run")
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Fatalf("Need touched the cache: %v", entries)
	}
}

func TestNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range All() {
		if seen[tool.Name] {
			t.Fatalf("two tools named %s", tool.Name)
		}
		seen[tool.Name] = true
		if got, ok := Named(tool.Name); !ok || got.Module != tool.Module || got.Version != tool.Version {
			t.Fatalf("Named(%s) = %+v %v", tool.Name, got, ok)
		}
		if tool.Module == "" || !strings.HasPrefix(tool.Version, "v") || tool.FirstBuild <= 0 {
			t.Fatalf("tool %+v", tool)
		}
	}
	if _, ok := Named("nope"); ok {
		t.Fatal("Named found a tool that is not there")
	}
}

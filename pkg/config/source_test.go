package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
)

// TestOverlayWins: a value of the overlay wins over the source under it,
// an empty one unsets it, and a name the overlay leaves out falls through.
func TestOverlayWins(t *testing.T) {
	t.Setenv("X_PORT", "1")
	t.Setenv("X_HOST", "env-host")
	t.Setenv("X_HIDDEN", "env-hidden")
	values := map[string]string{"X_PORT": "2", "X_HIDDEN": ""}
	src := config.Environ().Overlay("alicia up", values)
	values["X_PORT"] = "3" // copied: a later change is not seen

	port, host, hidden := 0, "default", "default"
	if err := src.Int("X_PORT", &port); err != nil || port != 2 {
		t.Fatalf("overlay's X_PORT: %d, %v; want 2", port, err)
	}
	src.String("X_HOST", &host)
	if host != "env-host" {
		t.Fatalf("X_HOST fell through to %q, want env-host", host)
	}
	src.String("X_HIDDEN", &hidden)
	if hidden != "default" || src.IsSet("X_HIDDEN") {
		t.Fatalf("X_HIDDEN unset by the overlay: %q", hidden)
	}
	if v, ok := src.Lookup("X_HIDDEN"); !ok || v != "" {
		t.Fatalf("Lookup(X_HIDDEN) = %q, %v; want the overlay's empty value", v, ok)
	}
	if o := src.Origin("X_PORT"); o != "alicia up" {
		t.Fatalf("Origin(X_PORT) = %q", o)
	}
	if o := src.Origin("X_HOST"); o != "the environment" {
		t.Fatalf("Origin(X_HOST) = %q", o)
	}
	if os.Getenv("X_PORT") != "1" || os.Getenv("X_HIDDEN") != "env-hidden" {
		t.Fatal("reading an overlay changed the environment")
	}
	// Overlays stack: the top one wins, each keeps its name.
	top := src.Overlay("a test", map[string]string{"X_HOST": "top"})
	top.String("X_HOST", &host)
	if p := 0; host != "top" || top.Int("X_PORT", &p) != nil || p != 2 || top.Origin("X_PORT") != "alicia up" {
		t.Fatalf("stacked overlays: host %q, port %d from %s", host, p, top.Origin("X_PORT"))
	}
}

// TestAbsentFallsThrough: the zero Source and a name no layer holds keep
// the default; Lookup says the name is absent.
func TestAbsentFallsThrough(t *testing.T) {
	src := config.Source{}.Overlay("map", map[string]string{"X_A": "1"})
	d, b, s := time.Second, true, "default"
	if err := errorsOf(src.Duration("X_ABSENT_D", &d), src.Bool("X_ABSENT_B", &b)); err != nil || d != time.Second || !b {
		t.Fatalf("absent names changed defaults: %s, %v, %v", d, b, err)
	}
	src.String("X_ABSENT", &s)
	var zero config.Source
	zero.String("X_A", &s)
	if s != "default" {
		t.Fatalf("String = %q", s)
	}
	if _, ok := src.Lookup("X_ABSENT"); ok {
		t.Fatal("Lookup found an absent name")
	}
}

// TestBadValueNamesVariableAndSource: a value that does not parse is an
// error naming the variable, the value and the layer it came from, and
// leaves the default.
func TestBadValueNamesVariableAndSource(t *testing.T) {
	t.Setenv("X_ENV_BAD", "soon")
	src := config.Environ().Overlay("alicia up", map[string]string{"X_BAD": "seven"})
	n := 7
	err := src.Int("X_BAD", &n)
	if err == nil || n != 7 || !strings.Contains(err.Error(), `X_BAD="seven"`) || !strings.Contains(err.Error(), "from alicia up") {
		t.Fatalf("bad overlay value: %d, %v", n, err)
	}
	d := time.Second
	err = src.Duration("X_ENV_BAD", &d)
	if err == nil || d != time.Second || !strings.Contains(err.Error(), `X_ENV_BAD="soon"`) || !strings.Contains(err.Error(), "from the environment") {
		t.Fatalf("bad environment value: %s, %v", d, err)
	}
	var size int64
	if err := src.Overlay("a test", map[string]string{"X_SIZE": "2 GB/s"}).Bytes("X_SIZE", &size); err == nil || !strings.Contains(err.Error(), "X_SIZE") ||
		!strings.Contains(err.Error(), "from a test") {
		t.Fatalf("bad size: %v", err)
	}
}

// TestSecretFromOverlay: the secret's value in an overlay wins over a file
// the environment names; a _FILE in the overlay is read, and a missing one
// is an error naming it and its source.
func TestSecretFromOverlay(t *testing.T) {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X_KEY", "")
	t.Setenv("X_KEY_FILE", f)
	var v string
	if err := config.Environ().Overlay("up", map[string]string{"X_KEY": "direct"}).Secret("X_KEY", &v); err != nil || v != "direct" {
		t.Fatalf("overlay's value: %q, %v", v, err)
	}
	src := config.Environ().Overlay("up", map[string]string{"X_KEY_FILE": ""})
	v = "default"
	if err := src.Secret("X_KEY", &v); err != nil || v != "default" || src.SecretFile("X_KEY") != "" {
		t.Fatalf("file unset by the overlay: %q, %v", v, err)
	}
	if err := config.Environ().Secret("X_KEY", &v); err != nil || v != "from-file" || config.Environ().SecretFile("X_KEY") != f {
		t.Fatalf("file of the environment: %q, %v", v, err)
	}
	missing := config.Source{}.Overlay("up", map[string]string{"X_KEY_FILE": filepath.Join(t.TempDir(), "nope")})
	if err := missing.Secret("X_KEY", &v); err == nil || !strings.Contains(err.Error(), "X_KEY_FILE from up") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestLookupSource: a source made from a lookup function.
func TestLookupSource(t *testing.T) {
	src := config.Lookup("flags", func(name string) (string, bool) { return "0.5", name == "X_F" })
	f := 1.0
	if err := src.Float64("X_F", &f); err != nil || f != 0.5 || src.Origin("X_F") != "flags" {
		t.Fatalf("Float64 = %v, %v from %s", f, err, src.Origin("X_F"))
	}
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

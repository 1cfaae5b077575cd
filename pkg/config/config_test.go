package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
)

func TestHelpers(t *testing.T) {
	t.Setenv("X_INT", "42")
	t.Setenv("X_DUR", "250ms")
	t.Setenv("X_BOOL", "false")
	t.Setenv("X_STR", "hello")
	n, d, b, s := 1, time.Second, true, "default"
	if err := config.Int("X_INT", &n); err != nil || n != 42 {
		t.Fatalf("Int = %d, %v", n, err)
	}
	if err := config.Duration("X_DUR", &d); err != nil || d != 250*time.Millisecond {
		t.Fatalf("Duration = %s, %v", d, err)
	}
	if err := config.Bool("X_BOOL", &b); err != nil || b {
		t.Fatalf("Bool = %v, %v", b, err)
	}
	t.Setenv("X_FLOAT", "0.35")
	f := 0.5
	if err := config.Float64("X_FLOAT", &f); err != nil || f != 0.35 {
		t.Fatalf("Float64 = %v, %v", f, err)
	}
	config.String("X_STR", &s)
	config.String("X_UNSET", &s)
	if s != "hello" {
		t.Fatalf("String = %q", s)
	}
	m := 7
	if err := config.Int("X_UNSET", &m); err != nil || m != 7 {
		t.Fatalf("unset variable changed the default: %d, %v", m, err)
	}
	t.Setenv("X_BAD", "seven")
	if err := config.Int("X_BAD", &m); err == nil || m != 7 {
		t.Fatalf("bad value: %d, %v", m, err)
	}
	if err := config.Float64("X_BAD", &f); err == nil || f != 0.35 {
		t.Fatalf("bad float: %v, %v", f, err)
	}
}

func TestSecretFromFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X_KEY_FILE", f)
	var v string
	if err := config.Secret("X_KEY", &v); err != nil || v != "s3cret" {
		t.Fatalf("Secret = %q, %v", v, err)
	}
	t.Setenv("X_KEY", "direct")
	if err := config.Secret("X_KEY", &v); err != nil || v != "direct" {
		t.Fatalf("env wins over file: %q, %v", v, err)
	}
	t.Setenv("X_MISSING_FILE", filepath.Join(t.TempDir(), "nope"))
	if err := config.Secret("X_MISSING", &v); err == nil {
		t.Fatal("missing secret file accepted")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512KiB": 512 << 10, "2 GiB": 2 << 30, "1.5MiB": 3 << 19, "10MB": 10e6, "-1": -1, "0": 0} {
		got, err := config.ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "2 GB/s", "-5", "1e30TiB"} {
		if _, err := config.ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q): no error", bad)
		}
	}
}

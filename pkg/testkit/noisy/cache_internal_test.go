package noisy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCacheReusesWhatWasMade: the second call reads the file the first one
// wrote; a damaged file is made again, the same.
func TestCacheReusesWhatWasMade(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	before := generated.Load()
	first := Noise(t, Fan, 2*time.Second)
	second := Noise(t, Fan, 2*time.Second)
	if n := generated.Load() - before; n != 1 {
		t.Fatalf("%d generations for two calls, want 1", n)
	}
	if !slices.Equal(first, second) {
		t.Fatal("the cached copy differs")
	}
	files, err := filepath.Glob(filepath.Join(dir, "alicia", "noisy", "*.wav"))
	if err != nil || len(files) != 1 {
		t.Fatalf("cache files %v (%v)", files, err)
	}
	if err := os.WriteFile(files[0], []byte("RIFF"), 0o644); err != nil {
		t.Fatal(err)
	}
	again := Noise(t, Fan, 2*time.Second)
	if n := generated.Load() - before; n != 2 || !slices.Equal(first, again) {
		t.Fatalf("damaged cache: %d generations, same samples %v", n, slices.Equal(first, again))
	}
	if Noise(t, Fan, 3*time.Second); generated.Load()-before != 3 {
		t.Fatal("another duration came from the cache")
	}
}

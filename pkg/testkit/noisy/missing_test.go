package noisy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit/noisy"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of
// stopping the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

// TestMissingToolsFailUnderCI: without sox or espeak-ng on PATH the test
// fails under CI=true and is skipped elsewhere; an unknown kind fails.
func TestMissingToolsFailUnderCI(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	make := map[string]func(testing.TB) []int16{
		"noise":  func(tb testing.TB) []int16 { return noisy.Noise(tb, noisy.Pink, time.Second) },
		"babble": func(tb testing.TB) []int16 { return noisy.Noise(tb, noisy.Babble, time.Second) },
		"speech": func(tb testing.TB) []int16 { return noisy.Speech(tb, "Hello.", "") },
	}
	for name, f := range make {
		for _, ci := range []string{"true", ""} {
			t.Setenv("CI", ci)
			r := &recorder{TB: t}
			if pcm := f(r); pcm != nil {
				t.Fatalf("%s, CI=%q: audio without the tool", name, ci)
			}
			if failed := r.fatal != ""; failed != (ci == "true") || (r.skip != "") == failed {
				t.Fatalf("%s, CI=%q: fatal %q, skip %q", name, ci, r.fatal, r.skip)
			}
		}
	}
	r := &recorder{TB: t}
	if noisy.Noise(r, "traffic", time.Second) != nil || r.fatal == "" {
		t.Fatalf("unknown kind: fatal %q", r.fatal)
	}
}

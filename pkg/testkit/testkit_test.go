package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of
// stopping the test.
type recorder struct {
	testing.TB
	failed  string
	skipped string
	errs    []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name     string
		after    int32 // cond becomes true on this call (0: never)
		wantFail bool
	}{
		{name: "true at once", after: 1},
		{name: "true after a few polls", after: 5},
		{name: "never true", after: 0, wantFail: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			r := &recorder{TB: t}
			testkit.Eventually(r, 200*time.Millisecond, func() bool {
				n := calls.Add(1)
				return tc.after > 0 && n >= tc.after
			}, "waiting for %s", "the thing")
			if got := r.failed != ""; got != tc.wantFail {
				t.Fatalf("failed=%v (%q), want %v", got, r.failed, tc.wantFail)
			}
			if tc.wantFail && !strings.Contains(r.failed, "waiting for the thing") {
				t.Fatalf("failure %q does not carry the message", r.failed)
			}
			if !tc.wantFail && calls.Load() != tc.after {
				t.Fatalf("cond called %d times, want %d", calls.Load(), tc.after)
			}
		})
	}
}

func TestCheckForReturnsLastError(t *testing.T) {
	want := errors.New("still broken")
	err := testkit.CheckFor(50*time.Millisecond, 5*time.Millisecond, func() error { return want })
	if !errors.Is(err, want) {
		t.Fatalf("CheckFor = %v, want %v", err, want)
	}
	if err := testkit.CheckFor(time.Second, 5*time.Millisecond, func() error { return nil }); err != nil {
		t.Fatalf("CheckFor = %v, want nil", err)
	}
}

func TestEventuallyNoError(t *testing.T) {
	r := &recorder{TB: t}
	testkit.EventuallyNoError(r, 30*time.Millisecond, func() error { return errors.New("boom") })
	if !strings.Contains(r.failed, "boom") {
		t.Fatalf("failure %q does not carry the last error", r.failed)
	}
}

func TestGo(t *testing.T) {
	t.Run("stop cancels and waits", func(t *testing.T) {
		var stopped atomic.Bool
		s := testkit.Go(t, "svc", func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Store(true)
			return ctx.Err()
		})
		s.Stop()
		if !stopped.Load() || s.Err() != context.Canceled {
			t.Fatalf("stopped %v, err %v", stopped.Load(), s.Err())
		}
		s.Stop() // twice is fine
	})
	t.Run("exits by itself", func(t *testing.T) {
		boom := errors.New("boom")
		r := &recorder{TB: t}
		s := testkit.Go(r, "svc", func(context.Context) error { return boom })
		<-s.Exited()
		s.Stop()
		if s.Err() != boom || len(r.errs) != 1 || !strings.Contains(r.errs[0], "svc: boom") {
			t.Fatalf("err %v, reported %q", s.Err(), r.errs)
		}
	})
}

func TestMissingFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	for _, ci := range []string{"true", "", "false"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		testkit.Missing(r, "no %s", "livekit-server")
		failed, skipped := "", "no livekit-server"
		if ci == "true" {
			failed, skipped = skipped, ""
		}
		if r.failed != failed || r.skipped != skipped {
			t.Errorf("CI=%q: failed %q, skipped %q; want %q, %q", ci, r.failed, r.skipped, failed, skipped)
		}
	}
}

func TestLogOnlyWhenAsked(t *testing.T) {
	t.Setenv("ALICIA_TEST_LOG", "")
	if l := testkit.Log(); l.GetLevel() != zerolog.Disabled {
		t.Errorf("without ALICIA_TEST_LOG the level is %s, want disabled", l.GetLevel())
	}
	t.Setenv("ALICIA_TEST_LOG", "1")
	if l := testkit.Log(); l.GetLevel() != zerolog.DebugLevel {
		t.Errorf("with ALICIA_TEST_LOG the level is %s, want debug", l.GetLevel())
	}
}

// TestFreeAddrBelowTheEphemeralRange: FreeAddr's ports are below the range
// port-0 listeners are handed ports from, and never twice.
func TestFreeAddrBelowTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr := testkit.FreeAddr(t)
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(port); n < 10000 || n >= 32768 {
			t.Fatalf("port %d: not below the ephemeral range", n)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		ln.Close()
	}
}

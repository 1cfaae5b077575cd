// Package testkit holds helpers shared by Alicia's tests. Subpackages start
// real dependencies: natstest an embedded JetStream server, pgtest a fresh
// PostgreSQL database with the migrations applied.
//
// Tests never sleep to wait for something: they poll a condition with
// Eventually or CheckFor.
package testkit

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Log is the logger tests give the services they run: debug output on
// stderr when ALICIA_TEST_LOG is set, nothing otherwise.
func Log() zerolog.Logger {
	if os.Getenv("ALICIA_TEST_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.DebugLevel).With().Timestamp().Logger()
}

// Missing reports something a test needs that this machine lacks (a
// PostgreSQL server, livekit-server, espeak-ng, root): under CI=true, where
// .ci/run installs all of it, the test fails; elsewhere it is skipped.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
		return
	}
	t.Skipf(format, args...)
}

// PollInterval is how often Eventually and CheckFor re-check.
const PollInterval = 10 * time.Millisecond

// Eventually polls cond every PollInterval until it returns true, and fails
// the test (t.Fatalf) if it has not within timeout. msgAndArgs, when given,
// describe what was awaited: a format string and its arguments.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	err := CheckFor(timeout, PollInterval, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		t.Fatalf("condition not met within %s%s", timeout, describe(msgAndArgs))
	}
}

// EventuallyNoError polls f until it returns nil, and fails the test with
// the last error if it has not within timeout.
func EventuallyNoError(t testing.TB, timeout time.Duration, f func() error, msgAndArgs ...any) {
	t.Helper()
	if err := CheckFor(timeout, PollInterval, f); err != nil {
		t.Fatalf("not done within %s%s: %v", timeout, describe(msgAndArgs), err)
	}
}

// CheckFor calls f every interval until it returns nil or timeout passes,
// and returns f's last error in the latter case (nats-server's checkFor
// without the testing.T).
func CheckFor(timeout, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}

type notYet struct{}

func (notYet) Error() string { return "condition still false" }

var errNotYet error = notYet{}

func describe(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return ": " + fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return ": " + fmt.Sprint(msgAndArgs...)
}

package devtools

import (
	"testing"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// Need returns the tool's path for a test. A missing tool fails the test
// under CI=true, and skips it elsewhere, with the sentence naming the step
// that installs it (Tool.Missing); it is never built from a test.
func Need(t testing.TB, tool Tool) string {
	t.Helper()
	p, err := tool.Find()
	if err != nil {
		testkit.Missing(t, "%v", err)
	}
	return p
}

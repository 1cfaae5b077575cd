package devcmd_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/devcmd"
)

func TestPostgresURLPrintsOnlyTheURL(t *testing.T) {
	if os.Getenv(localpg.EnvURL) == "" && os.Geteuid() != 0 {
		testkit.Missing(t, "needs root or %s", localpg.EnvURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := devcmd.PostgresURL(ctx, &stdout, &stderr); err != nil {
		t.Fatalf("PostgresURL: %v\nstderr:\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "postgres") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("stdout = %q, want one URL line", out)
	}
}

package migratecmd_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/cli/internal/migratecmd"
)

// writeSecret writes a secret file as compose mounts one (a trailing newline
// included) and returns its path.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "postgres_url")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// closedPort is a local TCP port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The compose file's migrate job gets only ALICIA_POSTGRES_URL_FILE: Run must
// use that database, never fall back to building a private cluster.
func TestURLFromFile(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"unreachable server", "", "does not answer"},
		{"missing file", filepath.Join(t.TempDir(), "nope"), "ALICIA_POSTGRES_URL_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = writeSecret(t, "postgres://alicia:pw@"+closedPort(t)+"/alicia?sslmode=disable&connect_timeout=2")
			}
			t.Setenv("ALICIA_POSTGRES_URL", "")
			t.Setenv("ALICIA_POSTGRES_URL_FILE", file)
			// A fallback to the private cluster would build it here, not in
			// the developer's cache, and give up quickly.
			t.Setenv("ALICIA_CACHE_DIR", t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := migratecmd.Run(ctx, "up", &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one mentioning %q (stderr %q)", err, tc.want, errOut.String())
			}
			if strings.Contains(errOut.String(), "debootstrap") || strings.Contains(errOut.String(), "localpg: building") {
				t.Fatalf("fell back to the private cluster:\n%s", errOut.String())
			}
		})
	}
}

func TestStatusThroughFile(t *testing.T) {
	url := pgtest.NewURL(t)
	t.Setenv("ALICIA_POSTGRES_URL", "")
	t.Setenv("ALICIA_POSTGRES_URL_FILE", writeSecret(t, url))
	var out, errOut bytes.Buffer
	if err := migratecmd.Run(context.Background(), "up", &out, &errOut); err != nil {
		t.Fatalf("up: %v (stderr %q)", err, errOut.String())
	}
	out.Reset()
	if err := migratecmd.Run(context.Background(), "status", &out, &errOut); err != nil {
		t.Fatalf("status: %v (stderr %q)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "applied") || !strings.Contains(out.String(), "00001_extensions_and_functions.sql") {
		t.Fatalf("status of the migrated database lists no applied migration:\n%s", out.String())
	}
}

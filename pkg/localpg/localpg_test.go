package localpg_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// needRoot skips (fails under CI=true) when the private cluster cannot be
// built here.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	testkit.Missing(t, "localpg tests need root (debootstrap, chroot)")
}

// logWriter sends progress lines to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func ensure(t *testing.T, opts localpg.Options) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	u, err := localpg.Ensure(ctx, opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Logf("Ensure took %s", time.Since(start).Round(time.Millisecond))
	return u
}

// checkVector connects to u and uses pgvector inside a rolled-back
// transaction.
func checkVector(t *testing.T, u string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rollback on purpose
	if _, err := tx.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		t.Fatalf("create extension vector: %v", err)
	}
	var version string
	if err := tx.QueryRow(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'vector'").Scan(&version); err != nil {
		t.Fatalf("pgvector version: %v", err)
	}
	var d float64
	if err := tx.QueryRow(ctx, "SELECT '[1,2,3]'::vector <-> '[1,2,5]'::vector").Scan(&d); err != nil {
		t.Fatalf("vector distance: %v", err)
	}
	if d != 2 {
		t.Fatalf("distance = %v, want 2", d)
	}
	var server string
	if err := tx.QueryRow(ctx, "SHOW server_version").Scan(&server); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(server, "17.") {
		t.Fatalf("server_version %q, want 17.x", server)
	}
	t.Logf("PostgreSQL %s, pgvector %s", server, version)
}

func port(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hostname() != "127.0.0.1" || p.User.Username() != "postgres" || p.Path != "/"+localpg.Database || p.Query().Get("sslmode") != "disable" {
		t.Fatalf("unexpected URL shape %s", u)
	}
	if pw, _ := p.User.Password(); len(pw) < 32 {
		t.Fatalf("password too short in %s", u)
	}
	return p.Port()
}

// TestEnsure builds (first time) or reuses the default cached cluster, the
// one tests and `alicia dev postgres` share.
func TestEnsure(t *testing.T) {
	needRoot(t)
	opts := localpg.Options{IgnoreEnv: true, Log: logWriter{t}}
	u := ensure(t, opts)
	port(t, u)
	checkVector(t, u)

	t.Run("reused", func(t *testing.T) {
		start := time.Now()
		if again := ensure(t, opts); again != u {
			t.Fatalf("second Ensure = %s, want %s", again, u)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("cached Ensure took %s", d)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		urls := make([]string, 4)
		errs := make([]error, 4)
		for i := range urls {
			wg.Go(func() {
				urls[i], errs[i] = localpg.Ensure(context.Background(), localpg.Options{IgnoreEnv: true, Log: logWriter{t}})
			})
		}
		wg.Wait()
		for i := range urls {
			if errs[i] != nil || urls[i] != u {
				t.Fatalf("Ensure #%d = %s, %v; want %s", i, urls[i], errs[i], u)
			}
		}
	})
	t.Run("unix socket with the password", func(t *testing.T) {
		dir, err := localpg.SocketDir(opts)
		if err != nil {
			t.Fatal(err)
		}
		tcp, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		pw, _ := tcp.User.Password()
		socketURL := func(password string) string {
			s := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", password), Host: "", Path: "/" + localpg.Database,
				RawQuery: url.Values{"host": {dir}, "port": {tcp.Port()}, "connect_timeout": {"5"}}.Encode()}
			return s.String()
		}
		checkVector(t, socketURL(pw))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, socketURL("wrong-password")); err == nil {
			conn.Close(ctx)
			t.Fatal("the socket accepted a wrong password")
		} else if !strings.Contains(err.Error(), "password authentication failed") {
			t.Fatalf("wrong password over the socket: %v, want a password authentication failure", err)
		}
	})
	t.Run("env URL wins", func(t *testing.T) {
		t.Setenv(localpg.EnvURL, u)
		if got := ensure(t, localpg.Options{Log: logWriter{t}}); got != u {
			t.Fatalf("Ensure = %s, want %s from %s", got, u, localpg.EnvURL)
		}
	})
	t.Run("env URL that does not answer", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "postgres://postgres:x@" + l.Addr().String() + "/alicia?sslmode=disable&connect_timeout=2"
		l.Close()
		t.Setenv(localpg.EnvURL, dead)
		_, err = localpg.Ensure(context.Background(), localpg.Options{Log: logWriter{t}})
		if err == nil || !strings.Contains(err.Error(), "does not answer") {
			t.Fatalf("Ensure with a dead %s = %v, want a 'does not answer' error", localpg.EnvURL, err)
		}
	})
}

// copyExcept copies the tree src to dst (cp -a) but for the subtree skip
// (a slash-separated path below src): only the directories on the way to
// it are walked, everything beside them is copied whole.
func copyExcept(t *testing.T, src, dst, skip string) {
	t.Helper()
	first, rest, _ := strings.Cut(skip, "/")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		switch {
		case e.Name() == first && rest == "":
			continue
		case e.Name() == first && e.IsDir():
			copyExcept(t, from, to, rest)
		default:
			if out, err := exec.Command("cp", "-a", "--reflink=auto", from, to).CombinedOutput(); err != nil {
				t.Fatalf("copy %s: %v\n%s", from, err, out)
			}
		}
	}
}

// TestStopAndRestart runs a second cluster in a temporary cache directory
// (a copy of the default root, so the shared cluster other tests use is not
// stopped): stop, restart on the same port, restart on a new port when the
// old one is taken.
func TestStopAndRestart(t *testing.T) {
	needRoot(t)
	shared, err := localpg.CacheDir(localpg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensure(t, localpg.Options{IgnoreEnv: true, Log: logWriter{t}}) // the root exists
	cache := t.TempDir()
	root := filepath.Join(cache, "pgroot")
	// The copy gets its own cluster: the shared one's data (which other
	// test processes are changing) is not copied.
	copyExcept(t, filepath.Join(shared, "pgroot"), root, "var/lib/alicia")
	opts := localpg.Options{CacheDir: cache, IgnoreEnv: true, Log: logWriter{t}}
	t.Cleanup(func() {
		if err := localpg.Stop(context.Background(), opts); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})

	u1 := ensure(t, opts)
	checkVector(t, u1)
	if fi, err := os.Stat(filepath.Join(cache, "localpg-password")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v %v, want mode 0600", fi, err)
	}

	if err := localpg.Stop(context.Background(), opts); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, u1); err == nil {
		conn.Close(ctx)
		t.Fatal("server still answers after Stop")
	}

	// A postmaster.pid left by a crash whose pid now belongs to another
	// program of the same uid (here: cat, blocked on its stdin), which
	// pg_ctl and the postmaster take for a live server.
	fi, err := os.Stat(filepath.Join(root, "var/lib/alicia/pgdata"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	other := exec.Command("cat")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = other.Wait() }()
	stale := fmt.Sprintf("%d\n/var/lib/alicia/pgdata\n1\n%s\n/var/lib/alicia/run\n127.0.0.1\n 1 1\nready\n", other.Process.Pid, port(t, u1))
	pidFile := filepath.Join(root, "var/lib/alicia/pgdata/postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pidFile, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}

	u2 := ensure(t, opts)
	if u2 != u1 {
		t.Fatalf("restart: %s, want the same port and password %s", u2, u1)
	}
	checkVector(t, u2)

	if err := localpg.Stop(context.Background(), opts); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:"+port(t, u1))
	if err != nil {
		t.Fatalf("take the old port: %v", err)
	}
	defer busy.Close()
	u3 := ensure(t, opts)
	if port(t, u3) == port(t, u1) {
		t.Fatalf("restart with port %s taken reused it: %s", port(t, u1), u3)
	}
	checkVector(t, u3)
}

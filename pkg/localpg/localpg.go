// Package localpg provides the PostgreSQL 17 + pgvector server that Alicia's
// dev stack and tests use.
//
// Ensure returns ALICIA_POSTGRES_URL (or the URL in the file
// ALICIA_POSTGRES_URL_FILE names) when it is set. Otherwise it runs a
// private cluster built only from Debian packages (Debian 12 has no pgvector
// package): a cached Debian trixie root made with
//
//	debootstrap --variant=minbase trixie <cache>/pgroot http://deb.debian.org/debian
//
// with postgresql-17 and postgresql-17-pgvector installed inside it by apt-get
// in a chroot. The cluster is created with initdb and run with pg_ctl inside
// that root as its postgres user; it listens only on 127.0.0.1 (on a free port
// chosen at first start) and on a unix socket inside the root (SocketDir),
// and clients of both authenticate with scram-sha-256 and a generated
// password kept in a 0600 file of the cache directory.
//
// The first build takes about 90 s (network bound); later calls reuse the
// root and the running cluster and return in milliseconds, or restart a
// stopped cluster in well under a second. Calls from several processes at
// once are serialised with a flock on the cache directory.
//
// Server settings, chosen for a developer machine: fsync and full_page_writes
// stay on (it is a real server and a crash must not corrupt it);
// synchronous_commit is off, so a crash of the machine can lose the last
// fraction of a second of commits, but never leaves the cluster inconsistent —
// this makes the many small transactions of test suites much cheaper;
// max_connections is 300 because parallel test packages each open pools;
// shared_buffers is 1 GB (given at every start) so memory search over a
// realistic number of memories is served from memory.
//
// Building needs root (debootstrap and chroot). Without root, set
// ALICIA_POSTGRES_URL to an existing PostgreSQL 17 + pgvector server.
package localpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/config"
)

// EnvURL names the environment variable that, when set, points Ensure at an
// existing server instead of the private cluster; EnvURL+"_FILE" names a
// file holding the URL instead (a mounted secret), as for the services.
const EnvURL = "ALICIA_POSTGRES_URL"

// EnvCacheDir names the environment variable that overrides the cache
// directory.
const EnvCacheDir = "ALICIA_CACHE_DIR"

// DefaultMirror is the Debian mirror debootstrap and apt use.
const DefaultMirror = "http://deb.debian.org/debian"

// Database is the database Ensure creates and whose URL it returns.
const Database = "alicia"

// Options configure Ensure and Stop. The zero value is ready to use.
type Options struct {
	// CacheDir holds the Debian root, the password file and the lock. Empty
	// means $ALICIA_CACHE_DIR, else $XDG_CACHE_HOME/alicia, else
	// ~/.cache/alicia.
	CacheDir string
	// Log receives progress messages. Nil means os.Stderr.
	Log io.Writer
	// Mirror is the Debian mirror. Empty means DefaultMirror.
	Mirror string
	// IgnoreEnv makes Ensure use the private cluster even when
	// ALICIA_POSTGRES_URL is set.
	IgnoreEnv bool
}

func (o Options) log() io.Writer {
	if o.Log == nil {
		return os.Stderr
	}
	return o.Log
}

func (o Options) logf(format string, args ...any) {
	fmt.Fprintf(o.log(), "localpg: "+format+"\n", args...)
}

func (o Options) mirror() string {
	if o.Mirror == "" {
		return DefaultMirror
	}
	return o.Mirror
}

// CacheDir returns the cache directory opts selects (see Options.CacheDir).
func CacheDir(opts Options) (string, error) {
	if opts.CacheDir != "" {
		return filepath.Abs(opts.CacheDir)
	}
	if d := os.Getenv(EnvCacheDir); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Abs(filepath.Join(d, "alicia"))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("localpg: no cache directory: set %s: %w", EnvCacheDir, err)
	}
	return filepath.Join(home, ".cache", "alicia"), nil
}

// Ensure returns the URL of a PostgreSQL 17 + pgvector server that answers:
// ALICIA_POSTGRES_URL if set (unless opts.IgnoreEnv), else the private
// cluster, built, started or reused as needed. The private cluster's URL is
// postgres://postgres:<password>@127.0.0.1:<port>/alicia?sslmode=disable.
func Ensure(ctx context.Context, opts Options) (string, error) {
	if !opts.IgnoreEnv {
		// As the services read it: the URL, or the file _FILE names.
		var u string
		if err := config.Secret(EnvURL, &u); err != nil {
			return "", fmt.Errorf("localpg: %w", err)
		}
		if u != "" {
			if err := ping(ctx, u); err != nil {
				return "", fmt.Errorf("localpg: %s (or %s_FILE) is set but the server does not answer: %w", EnvURL, EnvURL, err)
			}
			return u, nil
		}
	}
	c, err := newCluster(opts)
	if err != nil {
		return "", err
	}
	unlock, err := lockDir(ctx, c.cache, opts)
	if err != nil {
		return "", err
	}
	defer unlock()

	if err := c.ensureRoot(ctx); err != nil {
		return "", err
	}
	if err := c.ensureInit(ctx); err != nil {
		return "", err
	}
	authChanged, err := c.ensureLocalAuth()
	if err != nil {
		return "", err
	}
	port, err := c.ensureRunning(ctx)
	if err != nil {
		return "", err
	}
	if authChanged {
		if err := c.reload(ctx); err != nil {
			return "", err
		}
	}
	if err := c.ensureDatabase(ctx, port); err != nil {
		return "", err
	}
	return c.url(port, Database)
}

// SocketDir returns the directory of the private cluster's unix socket
// (.s.PGSQL.<port>, the port of Ensure's URL). Socket clients authenticate
// with the same password as TCP ones. Unix sockets are not tied to a network
// namespace: a test inside its own reaches the cluster through it with
//
//	postgres://postgres:<password>@/alicia?host=<SocketDir>&port=<port>
func SocketDir(opts Options) (string, error) {
	cache, err := CacheDir(opts)
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "pgroot", socketDir), nil
}

// Stop stops the private cluster if it runs (pg_ctl stop -m fast). It does
// nothing when the cluster was never built.
func Stop(ctx context.Context, opts Options) error {
	c, err := newCluster(opts)
	if err != nil {
		return err
	}
	unlock, err := lockDir(ctx, c.cache, opts)
	if err != nil {
		return err
	}
	defer unlock()
	return c.stop(ctx)
}

// newCluster checks the prerequisites of the private cluster: root, the
// tools, and the cache directory.
func newCluster(opts Options) (*cluster, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("localpg: the private PostgreSQL needs root (debootstrap, chroot); run as root or set %s to a PostgreSQL 17 + pgvector server URL", EnvURL)
	}
	cache, err := CacheDir(opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return nil, fmt.Errorf("localpg: cache directory: %w", err)
	}
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		return nil, fmt.Errorf("localpg: chroot (coreutils) not found: %w", err)
	}
	return &cluster{opts: opts, cache: cache, root: filepath.Join(cache, "pgroot"), chroot: chroot}, nil
}

// ping connects to url and runs a trivial query.
func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return errors.New("SELECT 1 returned an unexpected value")
	}
	return nil
}

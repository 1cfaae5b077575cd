// Package pgtest gives each test its own PostgreSQL database with Alicia's
// migrations applied, on the server localpg.Ensure provides
// (ALICIA_POSTGRES_URL, else the cached private cluster).
//
// Migrations are applied once to a template database named after a hash of
// the migration files (alicia_tpl_<hash>); every test database is a copy of
// it (CREATE DATABASE ... TEMPLATE), which takes milliseconds instead of
// re-running the migrations. The template stays on the server for later runs
// and is rebuilt when the migration files change. Each test database is
// dropped WITH (FORCE) when its test ends.
//
// When no server can be had, tests are skipped with the reason, except under
// CI=true where they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// New returns a pool on a fresh database with the migrations applied. The
// pool is closed and the database dropped when t ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: ping: %v", err)
	}
	return pool
}

// NewURL creates a fresh database with the migrations applied and returns
// its URL. The database is dropped WITH (FORCE) when t ends.
func NewURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, true)
}

// NewEmptyURL creates a fresh database with nothing in it — no migrations,
// no pgvector extension, as a newly installed server has — and returns its
// URL. The database is dropped WITH (FORCE) when t ends.
func NewEmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, false)
}

func newDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	srv := server()
	if srv.err != nil {
		msg := fmt.Sprintf("pgtest: no PostgreSQL server: %v (set %s, or run as root with debootstrap installed)", srv.err, localpg.EnvURL)
		testkit.Missing(t, "%s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl := "template0"
	if migrated {
		var err error
		if tpl, err = template(ctx, srv.admin); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	name := "alicia_test_" + slug(t.Name()) + "_" + randomHex(6)
	err := exec(ctx, srv.admin, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tpl))
	if migrated && isMissingDatabase(err) {
		// A process testing other migration files (another checkout, an
		// older build) dropped this template as stale: build it again.
		forgetTemplate(tpl)
		if tpl, err = template(ctx, srv.admin); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		err = exec(ctx, srv.admin, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tpl))
	}
	if err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := exec(ctx, srv.admin, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(srv.url)
	if err != nil {
		t.Fatalf("pgtest: server URL: %v", err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// serverState is the per-process server, got once.
type serverState struct {
	url   string          // as localpg.Ensure returned it
	admin *pgx.ConnConfig // parsed url, used for CREATE/DROP DATABASE
	err   error
}

var (
	serverOnce sync.Once
	srvState   serverState
)

func server() serverState {
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		u, err := localpg.Ensure(ctx, localpg.Options{})
		if err != nil {
			srvState.err = err
			return
		}
		if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
			srvState.err = fmt.Errorf("server URL must be a postgres:// URL")
			return
		}
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			srvState.err = fmt.Errorf("parse server URL: %w", err)
			return
		}
		srvState.url, srvState.admin = u, cfg
	})
	return srvState
}

var (
	tplMu   sync.Mutex
	tplName string
)

// template returns the name of the template database for the current
// migration files, building it if no process has yet. Building is serialised
// across processes with an advisory lock; a template only gets its final name
// (by RENAME) once fully migrated.
func template(ctx context.Context, admin *pgx.ConnConfig) (string, error) {
	tplMu.Lock()
	defer tplMu.Unlock()
	if tplName != "" {
		return tplName, nil
	}
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "alicia_tpl_" + sum[:16]

	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	key := int64(binary.BigEndian.Uint64([]byte("aliciatp")))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return "", fmt.Errorf("template lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", key) //nolint:errcheck // the session ends right after

	var found bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&found); err != nil {
		return "", err
	}
	if !found {
		if err := buildTemplate(ctx, conn, admin, name); err != nil {
			return "", err
		}
	}
	tplName = name
	return name, nil
}

// forgetTemplate makes the next template call look for (and build) it again.
func forgetTemplate(name string) {
	tplMu.Lock()
	defer tplMu.Unlock()
	if tplName == name {
		tplName = ""
	}
}

// isMissingDatabase: the template named does not exist (3D000).
func isMissingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}

// buildTemplate migrates a new database and renames it to name.
func buildTemplate(ctx context.Context, conn *pgx.Conn, admin *pgx.ConnConfig, name string) error {
	build := name + "_build_" + randomHex(4)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(build)); err != nil {
		return fmt.Errorf("create template %s: %w", build, err)
	}
	drop := func() {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(build)+" WITH (FORCE)")
	}
	cfg := admin.Copy()
	cfg.Database = build
	db := stdlib.OpenDB(*cfg)
	err := migrations.Up(ctx, db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		drop()
		return fmt.Errorf("migrate template: %w", err)
	}
	for _, q := range []string{
		"ALTER DATABASE " + ident(build) + " RENAME TO " + ident(name),
		"ALTER DATABASE " + ident(name) + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			drop()
			return fmt.Errorf("finish template: %w", err)
		}
	}
	dropStaleTemplates(ctx, conn, name)
	return nil
}

// dropStaleTemplates removes templates of older migration files. One still
// in use by another process cannot be dropped; it is left for a later run.
func dropStaleTemplates(ctx context.Context, conn *pgx.Conn, keep string) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'alicia\\_tpl\\_%' AND datname <> $1 AND datname NOT LIKE '%\\_build\\_%'", keep)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(n)+" WITH IS_TEMPLATE false"); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(n))
		}
	}
}

// migrationsHash is the hex SHA-256 of the migration files' names and
// contents.
func migrationsHash() (string, error) {
	var names []string
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read migrations: %w", err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", fmt.Errorf("read migrations: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// exec runs one statement on a short-lived connection.
func exec(ctx context.Context, cfg *pgx.ConnConfig, sql string) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// ident quotes a database name. Names are generated here, never taken from
// input; CREATE/DROP DATABASE take identifiers, not parameters.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// slug keeps lower-case letters and digits of a test name, up to 20.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= 20 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

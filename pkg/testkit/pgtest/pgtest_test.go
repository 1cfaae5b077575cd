package pgtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestNewMigratedWithVector(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	var version string
	if err := pool.QueryRow(ctx(t), "SELECT extversion FROM pg_extension WHERE extname = 'vector'").Scan(&version); err != nil {
		t.Fatalf("pgvector extension: %v", err)
	}
	var applied int64
	if err := pool.QueryRow(ctx(t), "SELECT max(version_id) FROM goose_db_version").Scan(&applied); err != nil {
		t.Fatalf("goose version table: %v", err)
	}
	if applied < 1 {
		t.Fatalf("no migration applied (version %d)", applied)
	}
	var d float64
	if err := pool.QueryRow(ctx(t), "SELECT $1::vector <-> $2::vector", "[0,0]", "[3,4]").Scan(&d); err != nil || d != 5 {
		t.Fatalf("vector distance = %v, %v; want 5", d, err)
	}
	t.Logf("pgvector %s, migrations up to %d", version, applied)
}

func TestDatabasesAreSeparate(t *testing.T) {
	t.Parallel()
	a, b := pgtest.New(t), pgtest.New(t)
	var nameA, nameB string
	if err := a.QueryRow(ctx(t), "SELECT current_database()").Scan(&nameA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx(t), "SELECT current_database()").Scan(&nameB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB {
		t.Fatalf("both tests got database %s", nameA)
	}
	if _, err := a.Exec(ctx(t), "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	var found bool
	if err := b.QueryRow(ctx(t), "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found {
		t.Fatal("a table created in one test database is visible in the other")
	}
}

// BenchmarkNewURL measures creating a test database from the template (the
// drops run at cleanup, outside the timing).
func BenchmarkNewURL(b *testing.B) {
	pgtest.NewURL(b) // server and template outside the timing
	for b.Loop() {
		pgtest.NewURL(b)
	}
}

func TestDatabaseDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var (
		url  string
		conn *pgx.Conn
	)
	t.Run("user", func(t *testing.T) {
		url = pgtest.NewURL(t)
		var err error
		// Still open when the subtest ends: the drop is WITH (FORCE).
		if conn, err = pgx.Connect(ctx(t), url); err != nil {
			t.Fatalf("connect: %v", err)
		}
	})
	if conn != nil {
		defer conn.Close(context.Background())
	}
	_, err := pgx.Connect(ctx(t), url)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		t.Fatalf("connect after cleanup = %v, want database does not exist (3D000)", err)
	}
}

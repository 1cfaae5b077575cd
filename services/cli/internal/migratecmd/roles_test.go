package migratecmd_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/cli/internal/migratecmd"
)

// withRoles sets the environment of the compose file's migrate job for the
// database at super (the superuser's URL): every URL in a file, the roles'
// with passwords of the test's choosing. It returns the roles' URLs.
func withRoles(t *testing.T, super string) localpg.RoleURLs {
	t.Helper()
	u, err := url.Parse(super)
	if err != nil {
		t.Fatal(err)
	}
	r := localpg.RolesFor(strings.TrimPrefix(u.Path, "/"))
	as := func(role string) string {
		v := *u
		v.User = url.UserPassword(role, "pw of "+role) // needs escaping in a URL
		return v.String()
	}
	urls := localpg.RoleURLs{Migrator: as(r.Migrator), Writer: as(r.Writer), Reader: as(r.Reader)}
	t.Cleanup(func() {
		if err := localpg.DropRoles(context.Background(), super); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	t.Setenv("ALICIA_POSTGRES_URL", "")
	t.Setenv("ALICIA_POSTGRES_URL_FILE", writeSecret(t, super))
	t.Setenv(migratecmd.EnvMigratorURL+"_FILE", writeSecret(t, urls.Migrator))
	t.Setenv(migratecmd.EnvWriterURL+"_FILE", writeSecret(t, urls.Writer))
	t.Setenv(migratecmd.EnvReaderURL+"_FILE", writeSecret(t, urls.Reader))
	return urls
}

func up(t *testing.T) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := migratecmd.Run(context.Background(), "up", &out, &errOut); err != nil {
		t.Fatalf("migrate up: %v (stderr %q)", err, errOut.String())
	}
}

func conn(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// notMigratorOwned lists the schema's tables and sequences someone other
// than the migrator owns.
func notMigratorOwned(t *testing.T, super, migrator string) []string {
	t.Helper()
	rows, err := conn(t, super).Query(context.Background(), `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'S') AND c.relowner::regrole::text <> $1`, migrator)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestUpWithRoles: what the compose file's migrate job does. On a database
// an earlier superuser-run `migrate up` made (a volume from before the
// roles: the postgres image's init script never runs on it), and on a new
// one, `migrate up` ensures the roles with the passwords of their URLs and
// migrates as the migrator; then the reader cannot write, even with its
// session's read-only default off, and the writer can.
func TestUpWithRoles(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   func(testing.TB) string
	}{
		{"existing database", pgtest.NewURL},
		{"new database", pgtest.NewEmptyURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			super := tc.db(t)
			urls := withRoles(t, super)
			up(t)
			up(t) // each `docker compose up` runs it again
			migrator, err := url.Parse(urls.Migrator)
			if err != nil {
				t.Fatal(err)
			}
			if names := notMigratorOwned(t, super, migrator.User.Username()); len(names) > 0 {
				t.Errorf("not owned by the migrator: %v", names)
			}
			var applied int
			if err := conn(t, urls.Migrator).QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil || applied == 0 {
				t.Fatalf("migrations applied: %d, %v", applied, err)
			}

			insert := `INSERT INTO alicia_conversations (id, title) VALUES ('ac_migrate_roles', 'x')`
			r := conn(t, urls.Reader)
			if _, err := r.Exec(ctx, "SET default_transaction_read_only = off"); err != nil {
				t.Fatal(err)
			}
			for _, sql := range []string{insert, `UPDATE alicia_conversations SET title = 'y'`, `DELETE FROM alicia_conversations`, `CREATE TABLE alicia_reader_made (x int)`} {
				if _, err := r.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "permission denied") {
					t.Errorf("reader: %s: %v, want permission denied", sql, err)
				}
			}
			w := conn(t, urls.Writer)
			if _, err := w.Exec(ctx, insert); err != nil {
				t.Fatalf("writer: %v", err)
			}
			var n int
			if err := r.QueryRow(ctx, `SELECT count(*) FROM alicia_conversations WHERE id = 'ac_migrate_roles'`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("reader reads the writer's row: %d, %v", n, err)
			}
		})
	}
}

// Making the roles needs a superuser: a non-superuser's URL is refused
// before anything runs.
func TestUpWithRolesNeedsSuperuser(t *testing.T) {
	super := pgtest.NewURL(t)
	withRoles(t, super)
	other, err := localpg.EnsureRoles(context.Background(), super)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_POSTGRES_URL_FILE", writeSecret(t, other.Writer))
	var out, errOut bytes.Buffer
	if err := migratecmd.Run(context.Background(), "up", &out, &errOut); !errors.Is(err, migratecmd.ErrNotSuperuser) {
		t.Fatalf("err = %v, want ErrNotSuperuser", err)
	}
}

func TestUpWithSomeRoles(t *testing.T) {
	t.Setenv("ALICIA_POSTGRES_URL", "")
	t.Setenv("ALICIA_POSTGRES_URL_FILE", writeSecret(t, pgtest.NewURL(t)))
	t.Setenv(migratecmd.EnvMigratorURL, "postgres://x:y@127.0.0.1/alicia")
	t.Setenv(migratecmd.EnvWriterURL, "")
	t.Setenv(migratecmd.EnvReaderURL, "")
	var out, errOut bytes.Buffer
	if err := migratecmd.Run(context.Background(), "up", &out, &errOut); err == nil || !strings.Contains(err.Error(), "or none") {
		t.Fatalf("err = %v, want all three or none", err)
	}
}

package deploycmd_test

import (
	"context"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/cli/deploycmd"
)

var update = flag.Bool("update", false, "rewrite deploy/postgres-init.sql")

// TestPostgresInitSQL: deploy/postgres-init.sql is what the generator
// makes from localpg.RolesSQL (one source of truth for the roles).
func TestPostgresInitSQL(t *testing.T) {
	path := filepath.Join("..", "..", "..", deploycmd.PostgresInitFile)
	want := deploycmd.PostgresInitSQL()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from deploycmd.PostgresInitSQL(): run go test ./services/cli/deploycmd -run TestPostgresInitSQL -update", deploycmd.PostgresInitFile)
	}
}

// TestPostgresInitSQLRuns: the script, run as the postgres image runs it
// (psql -v ON_ERROR_STOP=1 --no-psqlrc, as the superuser) in a new
// database, makes roles that log in with the password files' passwords.
func TestPostgresInitSQLRuns(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		testkit.Missing(t, "psql: %v", err)
	}
	ctx := context.Background()
	super := pgtest.NewEmptyURL(t)
	u, err := url.Parse(super)
	if err != nil {
		t.Fatal(err)
	}
	roles := localpg.RolesFor(strings.TrimPrefix(u.Path, "/"))
	t.Cleanup(func() {
		if err := localpg.DropRoles(context.Background(), super); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	dir := t.TempDir()
	script := filepath.Join(dir, "init.sql")
	if err := os.WriteFile(script, []byte(deploycmd.PostgresInitSQLFor(u.Path[1:])), 0o600); err != nil {
		t.Fatal(err)
	}
	env := os.Environ()
	passwords := map[string]string{}
	for role, v := range map[string]string{roles.Migrator: deploycmd.PostgresMigratorPasswordVar,
		roles.Writer: deploycmd.PostgresWriterPasswordVar, roles.Reader: deploycmd.PostgresReaderPasswordVar} {
		passwords[role] = "pw-" + role + "-it's"
		f := filepath.Join(dir, role)
		if err := os.WriteFile(f, []byte(passwords[role]+"\n"), 0o600); err != nil { // as init-secrets writes it
			t.Fatal(err)
		}
		env = append(env, v+"="+f)
	}
	cmd := exec.CommandContext(ctx, psql, "-v", "ON_ERROR_STOP=1", "--no-psqlrc", "-f", script, super)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	for role, pw := range passwords {
		v := *u
		v.User = url.UserPassword(role, pw)
		c, err := pgx.Connect(ctx, v.String())
		if err != nil {
			t.Fatalf("%s cannot log in with its password file's password: %v", role, err)
		}
		c.Close(ctx)
	}
	c, err := pgx.Connect(ctx, super)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var owner string
	var vector bool
	if err := c.QueryRow(ctx, `SELECT nspowner::regrole::text, EXISTS (SELECT FROM pg_extension WHERE extname = 'vector')
		FROM pg_namespace WHERE nspname = 'public'`).Scan(&owner, &vector); err != nil {
		t.Fatal(err)
	}
	if owner != roles.Migrator || !vector {
		t.Fatalf("public owned by %s (want %s), vector extension %v", owner, roles.Migrator, vector)
	}
}

package localpg

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Roles are the login roles of one Alicia database, least privilege each:
// Migrator owns the schema and everything in it (the migrations run as it);
// Writer (persistence, the only writer) reads and writes every table and is
// no superuser; Reader (gateway, llm, memory) may only SELECT, whatever its
// session settings say.
type Roles struct{ Migrator, Writer, Reader string }

// RolesFor names the roles of database db: db_migrator, db_writer,
// db_reader (shortened with a hash past Postgres's 63 bytes), so databases
// of one server (the tests') do not share roles.
func RolesFor(db string) Roles {
	if len(db) > 63-len("_migrator") {
		sum := sha256.Sum256([]byte(db))
		db = db[:40] + "_" + hex.EncodeToString(sum[:4])
	}
	return Roles{Migrator: db + "_migrator", Writer: db + "_writer", Reader: db + "_reader"}
}

// RolesSQL is what a superuser runs in the database to create or update the
// roles (password(role) is the SQL expression of each password: a literal,
// or a psql variable) and grant them their rights. It is idempotent and
// also moves what an earlier superuser-run migration created to Migrator,
// so it serves a new database and an existing one alike. Default
// privileges give Writer and Reader the tables later migrations create.
func RolesSQL(r Roles, password func(role string) string) string {
	m, w, rd := ident(r.Migrator), ident(r.Writer), ident(r.Reader)
	var b strings.Builder
	for _, role := range []string{r.Migrator, r.Writer, r.Reader} {
		fmt.Fprintf(&b, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %s) THEN CREATE ROLE %s; END IF; END $$;\n", literal(role), ident(role))
		fmt.Fprintf(&b, "ALTER ROLE %s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD %s;\n", ident(role), password(role))
	}
	// pgvector is not a trusted extension: the superuser creates it.
	b.WriteString("CREATE EXTENSION IF NOT EXISTS vector;\n")
	fmt.Fprintf(&b, "ALTER SCHEMA public OWNER TO %s;\n", m)
	b.WriteString("REVOKE CREATE ON SCHEMA public FROM PUBLIC;\n")
	// What migrations run by a superuser made (not the extension's own objects).
	fmt.Fprintf(&b, `DO $$ DECLARE o record; BEGIN
  FOR o IN SELECT format('%%s %%s', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, c.oid::regclass) AS obj
    FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
      AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
    UNION ALL SELECT format('TYPE %%s', t.oid::regtype) FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd')
      AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e')
    UNION ALL SELECT format('FUNCTION %%s', p.oid::regprocedure) FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
      AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
  LOOP EXECUTE format('ALTER %%s OWNER TO %%I', o.obj, %s); END LOOP;
END $$;
`, literal(r.Migrator))
	fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA public TO %s, %s;\n", w, rd)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %s;\n", w)
	fmt.Fprintf(&b, "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO %s;\n", w)
	fmt.Fprintf(&b, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s;\n", rd)
	fmt.Fprintf(&b, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s;\n", m, w)
	fmt.Fprintf(&b, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO %s;\n", m, w)
	fmt.Fprintf(&b, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public GRANT SELECT ON TABLES TO %s;\n", m, rd)
	return b.String()
}

// RoleURLs are the URLs each role logs in with.
type RoleURLs struct{ Migrator, Writer, Reader string }

// EnsureRoles runs RolesSQL, with fresh random passwords, in the database
// of superURL (a superuser's URL) and returns the roles' URLs: the same
// server and database as superURL.
func EnsureRoles(ctx context.Context, superURL string) (RoleURLs, error) {
	u, err := url.Parse(superURL)
	if err != nil {
		return RoleURLs{}, fmt.Errorf("localpg: roles: %w", err)
	}
	r := RolesFor(strings.TrimPrefix(u.Path, "/"))
	as := func(role string) string {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		v := *u
		v.User = url.UserPassword(role, hex.EncodeToString(b))
		return v.String()
	}
	urls := RoleURLs{Migrator: as(r.Migrator), Writer: as(r.Writer), Reader: as(r.Reader)}
	return urls, SetRoles(ctx, superURL, urls)
}

// ErrRoleURL is returned by SetRoles for a URL that does not log in as its
// role (RolesFor the database) with a password.
var ErrRoleURL = errors.New("localpg: a role's URL does not name the role and its password")

// SetRoles runs RolesSQL in the database of superURL (a superuser's URL)
// with the passwords urls carry, so that urls log in: what the compose
// deployment's migrate job does with the role URLs init-secrets wrote.
// Each URL's user must be its role's name (RolesFor superURL's database).
func SetRoles(ctx context.Context, superURL string, urls RoleURLs) error {
	u, err := url.Parse(superURL)
	if err != nil {
		return fmt.Errorf("localpg: roles: %w", err)
	}
	r := RolesFor(strings.TrimPrefix(u.Path, "/"))
	pw := map[string]string{}
	for _, c := range []struct{ role, url string }{{r.Migrator, urls.Migrator}, {r.Writer, urls.Writer}, {r.Reader, urls.Reader}} {
		ru, err := url.Parse(c.url)
		if err != nil || ru.User == nil {
			return fmt.Errorf("%w: %s", ErrRoleURL, c.role)
		}
		p, ok := ru.User.Password()
		if ru.User.Username() != c.role || !ok || p == "" {
			return fmt.Errorf("%w: want user %s with a password, got %q", ErrRoleURL, c.role, ru.User.Username())
		}
		pw[c.role] = p
	}
	conn, err := pgx.Connect(ctx, superURL)
	if err != nil {
		return fmt.Errorf("localpg: roles: %w", err)
	}
	defer conn.Close(context.Background())
	// One transaction: roles and grants appear together. Several starts at
	// once (tests) serialise on the advisory lock.
	sql := "SELECT pg_advisory_xact_lock(7240310);\n" + RolesSQL(r, func(role string) string { return literal(pw[role]) })
	if _, err := conn.Exec(ctx, "BEGIN;\n"+sql+"COMMIT;"); err != nil {
		return fmt.Errorf("localpg: roles: %w", err)
	}
	return nil
}

// IsSuperuser reports whether the role of pgURL is a superuser (who can
// make the roles).
func IsSuperuser(ctx context.Context, pgURL string) (bool, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var super bool
	err = conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super)
	return super, err
}

// DropRoles removes the roles of superURL's database (tests): what they
// own there goes to the superuser first.
func DropRoles(ctx context.Context, superURL string) error {
	u, err := url.Parse(superURL)
	if err != nil {
		return err
	}
	r := RolesFor(strings.TrimPrefix(u.Path, "/"))
	conn, err := pgx.Connect(ctx, superURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	list := ident(r.Migrator) + ", " + ident(r.Writer) + ", " + ident(r.Reader)
	m, w, rd := ident(r.Migrator), ident(r.Writer), ident(r.Reader)
	for _, sql := range []string{
		// REASSIGN OWNED stumbles on the default privileges: undo them first.
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + m + " IN SCHEMA public REVOKE ALL ON TABLES FROM " + w + ", " + rd,
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + m + " IN SCHEMA public REVOKE ALL ON SEQUENCES FROM " + w,
		"REASSIGN OWNED BY " + list + " TO CURRENT_USER", "DROP OWNED BY " + list, "DROP ROLE " + list} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

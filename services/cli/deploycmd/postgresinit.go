package deploycmd

import (
	"strings"

	"github.com/alicia-voice/alicia/pkg/localpg"
)

// PostgresInitFile is where the compose file's postgres service finds its
// init script (mounted into /docker-entrypoint-initdb.d), relative to the
// repository root.
const PostgresInitFile = "deploy/postgres-init.sql"

// The variables the init script reads each role's password file from (the
// postgres service's environment: /run/secrets/postgres_<role>_password).
const (
	PostgresMigratorPasswordVar = "POSTGRES_MIGRATOR_PASSWORD_FILE"
	PostgresWriterPasswordVar   = "POSTGRES_WRITER_PASSWORD_FILE"
	PostgresReaderPasswordVar   = "POSTGRES_READER_PASSWORD_FILE"
)

// PostgresInitSQL is deploy/postgres-init.sql: localpg.RolesSQL for the
// compose database, run by the postgres image's entrypoint (psql, as the
// superuser, in database alicia) when the volume is first created, with
// the passwords read from the files the variables above name.
func PostgresInitSQL() string { return postgresInitSQL(ComposeDatabase) }

func postgresInitSQL(db string) string {
	r := localpg.RolesFor(db)
	vars := map[string]string{r.Migrator: PostgresMigratorPasswordVar, r.Writer: PostgresWriterPasswordVar, r.Reader: PostgresReaderPasswordVar}
	var b strings.Builder
	b.WriteString(`-- Generated from localpg.RolesSQL by deploycmd.PostgresInitSQL: do not edit.
-- go test ./services/cli/deploycmd -run TestPostgresInitSQL -update
-- rewrites it.
--
-- The postgres image runs it once, as the superuser, when the postgres-data
-- volume is created: the database's roles (deploy/README.md, Boundaries)
-- with the passwords init-secrets wrote, and the vector extension (not
-- trusted: the superuser's job). On an existing volume the migrate job
-- makes the roles (alicia migrate up with the superuser's URL and the
-- roles' URLs).
`)
	for _, role := range []string{r.Migrator, r.Writer, r.Reader} {
		// psql runs the backquoted command and drops its trailing newline.
		b.WriteString(`\set ` + role + "_password `cat \"$" + vars[role] + "\"`\n")
	}
	b.WriteString(localpg.RolesSQL(r, func(role string) string { return ":'" + role + "_password'" }))
	return b.String()
}

// Package migratecmd implements `alicia migrate up|down|status`.
package migratecmd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/pgread"
)

// The roles' URLs (or, with _FILE, the files holding them: the compose
// file's postgres_<role>_url secrets). When all three are set, `migrate up`
// first makes the roles with them (ALICIA_POSTGRES_URL must then be a
// superuser's) and every direction runs as the migrator.
const (
	EnvMigratorURL = "ALICIA_POSTGRES_MIGRATOR_URL"
	EnvWriterURL   = "ALICIA_POSTGRES_WRITER_URL"
	EnvReaderURL   = "ALICIA_POSTGRES_READER_URL"
)

// ErrNotSuperuser: the roles' URLs are given but ALICIA_POSTGRES_URL's
// role cannot make the roles.
var ErrNotSuperuser = errors.New("ALICIA_POSTGRES_URL is not a superuser's: it cannot make the roles")

// Run applies direction ("up", "down" to zero, "status") to the database at
// ALICIA_POSTGRES_URL, or at the URL in the file ALICIA_POSTGRES_URL_FILE
// names (a mounted secret, as the services read it: the compose file's
// migrate job), or to the local dev cluster when neither is set.
//
// With the roles' URLs set (EnvMigratorURL, EnvWriterURL, EnvReaderURL),
// as the compose file's migrate job has them, `up` first makes or updates
// the roles with their passwords (localpg.SetRoles, as the superuser: an
// existing volume, where the postgres image's init script never ran, gets
// them too, and what earlier superuser-run migrations made is handed to the
// migrator), and the migrations run as the migrator.
func Run(ctx context.Context, direction string, stdout, stderr io.Writer) error {
	url, err := localpg.Ensure(ctx, localpg.Options{Log: stderr})
	if err != nil {
		return err
	}
	// The database may still be starting (a compose deployment's first
	// start, a reboot): wait for it, up to ALICIA_MIGRATE_WAIT (2m), each
	// failed try logged; a wrong password or a missing database fails at
	// once.
	wait := 2 * time.Minute
	if err := config.Duration("ALICIA_MIGRATE_WAIT", &wait); err != nil {
		return err
	}
	if err := pgread.WaitForSchema(ctx, url, pgread.Reachable, wait, zerolog.New(stderr).With().Timestamp().Logger()); err != nil {
		return fmt.Errorf("migrate %s: %w", direction, err)
	}
	roles, ok, err := roleURLs()
	if err != nil {
		return err
	}
	if ok {
		if direction == "up" {
			if err := ensureRoles(ctx, url, roles); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "migrate up: roles of the database ensured; migrating as the migrator\n")
		}
		url = roles.Migrator
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	switch direction {
	case "up":
		err = migrations.Up(ctx, db)
	case "down":
		err = migrations.Down(ctx, db)
	case "status":
		err = migrations.Status(ctx, db, stdout)
	default:
		return fmt.Errorf("unknown migrate command %q", direction)
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", direction, err)
	}
	if direction != "status" {
		fmt.Fprintf(stdout, "migrate %s: done\n", direction)
	}
	return nil
}

// roleURLs reads the roles' URLs: all three or none.
func roleURLs() (localpg.RoleURLs, bool, error) {
	var r localpg.RoleURLs
	// One call per constant: composecheck sees what the binary reads.
	errs := []error{
		config.Secret(EnvMigratorURL, &r.Migrator),
		config.Secret(EnvWriterURL, &r.Writer),
		config.Secret(EnvReaderURL, &r.Reader),
	}
	if err := errors.Join(errs...); err != nil {
		return r, false, err
	}
	switch set := r.Migrator != "" && r.Writer != "" && r.Reader != ""; {
	case set:
		return r, true, nil
	case r.Migrator != "" || r.Writer != "" || r.Reader != "":
		return r, false, fmt.Errorf("migrate: set all of %s, %s and %s (or their _FILE) or none", EnvMigratorURL, EnvWriterURL, EnvReaderURL)
	}
	return r, false, nil
}

func ensureRoles(ctx context.Context, superURL string, roles localpg.RoleURLs) error {
	super, err := localpg.IsSuperuser(ctx, superURL)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if !super {
		return fmt.Errorf("migrate: %w", ErrNotSuperuser)
	}
	if err := localpg.SetRoles(ctx, superURL, roles); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

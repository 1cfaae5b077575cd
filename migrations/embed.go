// Package migrations holds the Alicia PostgreSQL schema as goose plain-SQL
// migrations, embedded in FS, and helpers that apply, roll back and report
// them with goose's Provider API (postgres dialect, advisory-lock protected).
//
// The schema needs PostgreSQL 15+ (UNIQUE NULLS NOT DISTINCT, column lists in
// ON DELETE SET NULL) and the pgvector extension; it is developed and tested
// against PostgreSQL 17 with pgvector 0.8. See README.md for the tables and
// the constraints the persistence service relies on.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files (NNNNN_name.sql) at its root.
//
//go:embed *.sql
var FS embed.FS

// lockID is the advisory lock key taken while migrating, so that services
// starting at the same time apply the migrations exactly once. It is goose's
// default key: any goose run against the same database is serialised too.
const lockID = lock.DefaultLockID

// NewProvider returns a goose provider over FS for db (postgres dialect),
// holding a session advisory lock while it migrates. Extra goose options are
// appended after the defaults.
func NewProvider(db *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	if db == nil {
		return nil, errors.New("migrations: nil *sql.DB")
	}
	// Poll for the lock every second, for up to 5 minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	all := append([]goose.ProviderOption{goose.WithSessionLocker(locker)}, opts...)
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, all...)
	if err != nil {
		return nil, fmt.Errorf("migrations: goose provider: %w", err)
	}
	return p, nil
}

// Up applies every pending migration.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := NewProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down rolls back every applied migration, down to version 0 (an empty
// schema apart from goose's own version table).
func Down(ctx context.Context, db *sql.DB) error {
	p, err := NewProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Status writes one line per migration to w: version, state (applied or
// pending), when it was applied, and the file name.
func Status(ctx context.Context, db *sql.DB, w io.Writer) error {
	p, err := NewProvider(db)
	if err != nil {
		return err
	}
	statuses, err := p.Status(ctx)
	if err != nil {
		return fmt.Errorf("migrations: status: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tFILE")
	for _, s := range statuses {
		applied := "-"
		if s.State == goose.StateApplied {
			applied = s.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, applied, s.Source.Path)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("migrations: status: write: %w", err)
	}
	return nil
}

// Versions returns the versions of the migrations in FS, ascending: the
// schema this build expects.
func Versions() ([]int64, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	out := make([]int64, 0, len(names))
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", n, err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// Pending returns the versions of FS not applied to db, ascending; all of
// them when goose's version table does not exist yet. It only reads, so a
// service with a read-only connection can ask whether the schema it needs
// is there before it starts (goose's own status calls create the table).
func Pending(ctx context.Context, db *sql.DB) ([]int64, error) {
	want, err := Versions()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrations: version table: %w", err)
	}
	if !exists {
		return want, nil
	}
	// goose appends a row per up and per down; the newest row of a version says whether it is applied.
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT ON (version_id) version_id, is_applied
		FROM goose_db_version ORDER BY version_id, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("migrations: applied versions: %w", err)
	}
	defer rows.Close()
	applied := map[int64]bool{}
	for rows.Next() {
		var v int64
		var ok bool
		if err := rows.Scan(&v, &ok); err != nil {
			return nil, fmt.Errorf("migrations: applied versions: %w", err)
		}
		applied[v] = ok
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrations: applied versions: %w", err)
	}
	var pending []int64
	for _, v := range want {
		if !applied[v] {
			pending = append(pending, v)
		}
	}
	return pending, nil
}

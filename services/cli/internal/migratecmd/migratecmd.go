// Package migratecmd implements `alicia migrate up|down|status`.
package migratecmd

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
)

// Run applies direction ("up", "down" to zero, "status") to the database at
// ALICIA_POSTGRES_URL, or at the URL in the file ALICIA_POSTGRES_URL_FILE
// names (a mounted secret, as the services read it: the compose file's
// migrate job), or to the local dev cluster when neither is set.
func Run(ctx context.Context, direction string, stdout, stderr io.Writer) error {
	url, err := localpg.Ensure(ctx, localpg.Options{Log: stderr})
	if err != nil {
		return err
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

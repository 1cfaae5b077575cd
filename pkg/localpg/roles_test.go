package localpg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
)

func connectAs(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestRoles: on a database migrated by the superuser (pgtest's template),
// EnsureRoles makes a reader that cannot write even after turning its
// read-only default off, a writer that is no superuser and writes the
// tables, and a migrator that owns the schema; tables a later migration
// creates are granted too.
func TestRoles(t *testing.T) {
	ctx := context.Background()
	super := pgtest.NewURL(t)
	urls, err := localpg.EnsureRoles(ctx, super)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := localpg.DropRoles(context.Background(), super); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	if _, err := localpg.EnsureRoles(ctx, super); err != nil { // again: idempotent, new passwords
		t.Fatalf("second EnsureRoles: %v", err)
	}
	urls, err = localpg.EnsureRoles(ctx, super)
	if err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO alicia_conversations (id, title) VALUES ('ac_roles', 'x')`

	t.Run("reader", func(t *testing.T) {
		c := connectAs(t, urls.Reader)
		if _, err := c.Exec(ctx, "SET default_transaction_read_only = off"); err != nil {
			t.Fatal(err)
		}
		for _, sql := range []string{insert, `UPDATE alicia_conversations SET title = 'y'`, `DELETE FROM alicia_conversations`,
			`CREATE TABLE alicia_reader_made (x int)`, `TRUNCATE alicia_conversations`} {
			if _, err := c.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("%s: %v, want permission denied", sql, err)
			}
		}
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM alicia_conversations`).Scan(&n); err != nil {
			t.Fatalf("reader cannot read: %v", err)
		}
	})
	t.Run("writer", func(t *testing.T) {
		c := connectAs(t, urls.Writer)
		var super bool
		if err := c.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil || super {
			t.Fatalf("writer rolsuper = %v, %v", super, err)
		}
		if _, err := c.Exec(ctx, insert); err != nil {
			t.Fatalf("writer: %v", err)
		}
		if _, err := c.Exec(ctx, `CREATE TABLE alicia_writer_made (x int)`); err == nil {
			t.Fatal("the writer created a table")
		}
	})
	t.Run("a later migration's table", func(t *testing.T) {
		m := connectAs(t, urls.Migrator)
		if _, err := m.Exec(ctx, `CREATE TABLE alicia_later (id text PRIMARY KEY)`); err != nil {
			t.Fatalf("migrator: %v", err)
		}
		if _, err := connectAs(t, urls.Writer).Exec(ctx, `INSERT INTO alicia_later VALUES ('a')`); err != nil {
			t.Fatalf("writer on the new table: %v", err)
		}
		r := connectAs(t, urls.Reader)
		var n int
		if err := r.QueryRow(ctx, `SELECT count(*) FROM alicia_later`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("reader on the new table: %d, %v", n, err)
		}
		if _, err := r.Exec(ctx, `INSERT INTO alicia_later VALUES ('b')`); err == nil {
			t.Fatal("the reader wrote the new table")
		}
	})
}

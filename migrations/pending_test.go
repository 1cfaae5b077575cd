package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/migrations"
)

// TestPending: every version of a new database is pending, none after Up,
// and a rolled-back one is pending again — read without writing (a
// read-only transaction must do).
func TestPending(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	all, err := migrations.Versions()
	if err != nil || len(all) < 7 || !slices.IsSorted(all) || all[0] != 1 {
		t.Fatalf("Versions = %v, %v", all, err)
	}
	pending := func() []int64 {
		t.Helper()
		if _, err := db.ExecContext(ctx, "SET SESSION default_transaction_read_only = on"); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = db.ExecContext(ctx, "SET SESSION default_transaction_read_only = off") }()
		p, err := migrations.Pending(ctx, db)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		return p
	}
	db.SetMaxOpenConns(1) // the session settings above apply to the one connection
	if got := pending(); !slices.Equal(got, all) {
		t.Fatalf("new database: pending %v, want %v", got, all)
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := pending(); len(got) != 0 {
		t.Fatalf("after Up: pending %v", got)
	}
	p, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pending(); !slices.Equal(got, all[len(all)-1:]) {
		t.Fatalf("after one Down: pending %v, want %v", got, all[len(all)-1:])
	}
}

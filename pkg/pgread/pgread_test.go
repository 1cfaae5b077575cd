package pgread_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/rs/zerolog"
)

func TestEveryTransactionIsReadOnly(t *testing.T) {
	pool, err := pgread.Open(context.Background(), pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_conversations`).Scan(&n); err != nil {
		t.Fatalf("read: %v", err)
	}
	_, err = pool.Exec(context.Background(), `INSERT INTO alicia_conversations (id) VALUES ('ac_readonly')`)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write through a read pool: %v, want a read-only error", err)
	}
	if _, err := pgread.Open(context.Background(), "://nope"); err == nil {
		t.Fatal("a bad URL was accepted")
	}
}

// TestWaitGivesUpAtOnceOnWhatNoWaitCures: a wrong password or a database
// that does not exist is an error at once, not after the wait; a server
// that does not answer is waited for until the limit.
func TestWaitGivesUpAtOnceOnWhatNoWaitCures(t *testing.T) {
	good := pgtest.NewURL(t)
	u, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "not-the-password")
	noDatabase := *u
	noDatabase.Path = "/alicia_no_such_database"
	for name, c := range map[string]struct{ url, code string }{
		"a wrong password": {wrongPassword.String(), "28P01"},
		"no such database": {noDatabase.String(), "3D000"},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := pgread.WaitForSchema(t.Context(), c.url, pgread.Reachable, time.Minute, zerolog.Nop())
			if err == nil || !strings.Contains(err.Error(), c.code) || time.Since(start) > 10*time.Second {
				t.Fatalf("after %s: %v, want %s at once", time.Since(start), err, c.code)
			}
		})
	}
	start := time.Now()
	err = pgread.WaitForSchema(t.Context(), "postgres://x:y@"+testkit.FreeAddr(t)+"/db?sslmode=disable", pgread.Reachable, 1500*time.Millisecond, zerolog.Nop())
	if !errors.Is(err, pgread.ErrSchema) || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("a server that does not answer: %v after %s, want ErrSchema after the limit", err, time.Since(start))
	}
	if err := pgread.WaitForSchema(t.Context(), good, pgread.Reachable, time.Minute, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
}

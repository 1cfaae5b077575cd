package pgread_test

import (
	"context"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
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

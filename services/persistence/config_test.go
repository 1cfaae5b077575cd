package persistence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/persistence"
)

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://u@127.0.0.1:5432/alicia")
	t.Setenv("ALICIA_PERSISTENCE_BATCH", "250")
	t.Setenv("ALICIA_PERSISTENCE_LINGER", "5ms")
	t.Setenv("ALICIA_PERSISTENCE_SHARDS", "3")
	t.Setenv("ALICIA_PERSISTENCE_WAIT", "2s")
	t.Setenv("ALICIA_PERSISTENCE_INSTANCE", "persistence-7f9c")
	t.Setenv("ALICIA_PERSISTENCE_LEASE_TTL", "3s")
	c, err := persistence.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.BatchSize != 250 || c.Linger != 5*time.Millisecond || c.Shards != 3 || c.HistoryWait != 2*time.Second || c.NATSURL != "nats://127.0.0.1:4222" {
		t.Fatalf("config = %+v", c)
	}
	if c.Instance != "persistence-7f9c" || c.LeaseTTL != 3*time.Second || c.InstanceConsumer() != "persistence-persistence-7f9c-"+c.ConsumerToken || len(c.ConsumerToken) != 16 {
		t.Fatalf("instance %q, lease %s, consumer %q", c.Instance, c.LeaseTTL, c.InstanceConsumer())
	}

	t.Setenv("ALICIA_PERSISTENCE_BATCH", "0")
	t.Setenv("ALICIA_PERSISTENCE_SHARDS", "100")
	t.Setenv("ALICIA_POSTGRES_URL", "")
	t.Setenv("ALICIA_PERSISTENCE_WAIT", "0s")
	t.Setenv("ALICIA_PERSISTENCE_INSTANCE", "host.example/1")
	t.Setenv("ALICIA_PERSISTENCE_LEASE_TTL", "100ms")
	_, err = persistence.ConfigFromEnv()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"batch size 0", "shards 100", "Postgres URL is empty", "wait 0s is not positive", `instance "host.example/1"`, "lease TTL 100ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not report %q", err, want)
		}
	}
}

// The default instance name is usable as part of a consumer name whatever
// the host is called.
func TestDefaultInstance(t *testing.T) {
	c := persistence.DefaultConfig()
	c.PostgresURL = "postgres://u@127.0.0.1:5432/alicia"
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v (instance %q)", err, c.Instance)
	}
	// The consumer's name cannot be guessed from one process to the next.
	if other := persistence.DefaultConfig(); other.ConsumerToken == c.ConsumerToken {
		t.Fatalf("two processes' consumers share the token %q", c.ConsumerToken)
	}
	c.ConsumerToken = ""
	if err := c.Validate(); err == nil {
		t.Fatal("a guessable consumer name accepted")
	}
}

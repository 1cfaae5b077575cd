// Package persistence is the only writer to PostgreSQL: it consumes every
// protocol envelope of the CONVERSATIONS and SYSTEM streams durably and maps
// it to rows as the Mapping table of its README.md describes, and answers
// history.get and persistence.applied with read-your-writes.
package persistence

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Config of the persistence service. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	// Postgres: ALICIA_POSTGRES_URL or ALICIA_POSTGRES_URL_FILE.
	pgread.Postgres
	// Consumer is the durable consumer name (ALICIA_PERSISTENCE_CONSUMER,
	// default natsauth.PersistenceConsumer: the other services' NATS users
	// are denied that name; another one must be added to natsauth.Durables
	// and deploy/nats.conf regenerated).
	Consumer string
	// BatchSize is the most envelopes applied in one transaction (ALICIA_PERSISTENCE_BATCH, default 1000).
	BatchSize int
	// Linger is how long a started batch waits for more envelopes (ALICIA_PERSISTENCE_LINGER, default 2ms).
	Linger time.Duration
	// Shards is how many transactions apply a batch of conversation
	// envelopes in parallel, split by conversation (ALICIA_PERSISTENCE_SHARDS).
	// The default 1 is one transaction per batch; 2 applies ~20% more
	// envelopes/s on two cores, each shard with its own stored offset.
	Shards int
	// Instance names this process among the persistence instances sharing
	// the partitions (ALICIA_PERSISTENCE_INSTANCE, default host-pid). A
	// restarted process under the same name takes its partitions back at
	// once; under a new one, once their leases have expired.
	Instance string
	// ConsumerToken ends the name of this instance's consumers: random per
	// process (DefaultConfig), so that no other service can guess the name
	// and pull from them (their NATS users may pull from consumers on
	// CONVERSATIONS they name; an envelope pulled away would be acked
	// unapplied by the next AckAll). Not listed: others cannot list
	// consumers. 16 lowercase hex digits (telemetry.NewInstanceToken), which
	// the consumer-lag metrics leave out of their consumer label.
	ConsumerToken string
	// LeaseTTL is how long a partition stays with an instance that stopped
	// renewing it (ALICIA_PERSISTENCE_LEASE_TTL, default 5s): how long the
	// partitions of an instance that died wait for another.
	LeaseTTL time.Duration
	// Migrate applies the migrations at start (ALICIA_PERSISTENCE_MIGRATE, default true).
	Migrate bool
	// HistoryWait bounds how long history.get and persistence.applied wait
	// for a sequence to be applied before answering 504
	// (ALICIA_PERSISTENCE_WAIT, default 5s).
	HistoryWait time.Duration
	// SweepAfter: an answer still pending or streaming this long after it
	// was last written was left open by a crash, and the sweep closes it as
	// failed (ALICIA_PERSISTENCE_SWEEP_AFTER, default 15m, beyond any
	// turn's retries; 0 turns the sweep off); SweepEvery is how often it
	// looks (ALICIA_PERSISTENCE_SWEEP_EVERY, default 1m). sweep.go.
	SweepAfter, SweepEvery time.Duration
	// MetricsAddr serves /metrics and /healthz when set (ALICIA_PERSISTENCE_METRICS_ADDR).
	svcmain.Metrics
	// BacklogInterval is how often the backlog is reported to the edges
	// (pkg/backlog) and its gauges set (default backlog.DefaultInterval, a
	// second; tests shorten it).
	BacklogInterval time.Duration
	// OnApplied, when set, is called after each committed batch with the
	// highest stream sequence it covered (measurements, tests).
	OnApplied func(stream string, upTo uint64)
}

// metricsAddrVar names the persistence's metrics address.
const metricsAddrVar = "ALICIA_PERSISTENCE_METRICS_ADDR"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Bus:           svcmain.DefaultBus(),
		Consumer:      natsauth.PersistenceConsumer,
		BatchSize:     1000,
		Linger:        2 * time.Millisecond,
		Shards:        1,
		Instance:      defaultInstance(),
		ConsumerToken: telemetry.NewInstanceToken(),
		LeaseTTL:      5 * time.Second,
		Migrate:       true,
		HistoryWait:   5 * time.Second,
		SweepAfter:    15 * time.Minute,
		SweepEvery:    time.Minute,
	}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the persistence command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_PERSISTENCE_CONSUMER", &c.Consumer)
	c.Metrics.From(src, metricsAddrVar)
	src.String("ALICIA_PERSISTENCE_INSTANCE", &c.Instance)
	err := errors.Join(
		c.Bus.From(src),
		c.Postgres.From(src),
		src.Int("ALICIA_PERSISTENCE_BATCH", &c.BatchSize),
		src.Int("ALICIA_PERSISTENCE_SHARDS", &c.Shards),
		src.Duration("ALICIA_PERSISTENCE_LINGER", &c.Linger),
		src.Duration("ALICIA_PERSISTENCE_WAIT", &c.HistoryWait),
		src.Duration("ALICIA_PERSISTENCE_SWEEP_AFTER", &c.SweepAfter),
		src.Duration("ALICIA_PERSISTENCE_SWEEP_EVERY", &c.SweepEvery),
		src.Duration("ALICIA_PERSISTENCE_LEASE_TTL", &c.LeaseTTL),
		src.Bool("ALICIA_PERSISTENCE_MIGRATE", &c.Migrate),
	)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	errs := []error{c.Bus.Validate(), c.Postgres.Validate(), c.Metrics.Validate(metricsAddrVar)}
	if c.Consumer == "" {
		errs = append(errs, errors.New("consumer name is empty"))
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("batch size %d is outside 1..10000", c.BatchSize))
	}
	if c.Linger < 0 {
		errs = append(errs, fmt.Errorf("linger %s is negative", c.Linger))
	}
	if c.HistoryWait <= 0 {
		errs = append(errs, fmt.Errorf("wait %s is not positive (ALICIA_PERSISTENCE_WAIT)", c.HistoryWait))
	}
	if c.SweepAfter < 0 || (c.SweepAfter > 0 && c.SweepAfter < time.Minute) {
		errs = append(errs, fmt.Errorf("sweep after %s: 0 (off) or at least 1m, beyond any turn still writing (ALICIA_PERSISTENCE_SWEEP_AFTER)", c.SweepAfter))
	}
	if c.SweepEvery <= 0 {
		errs = append(errs, fmt.Errorf("sweep every %s is not positive (ALICIA_PERSISTENCE_SWEEP_EVERY)", c.SweepEvery))
	}
	if !validInstance(c.Instance) {
		errs = append(errs, fmt.Errorf("instance %q is not 1..64 letters, digits, - and _ (ALICIA_PERSISTENCE_INSTANCE)", c.Instance))
	}
	if !telemetry.ValidInstanceToken(c.ConsumerToken) {
		errs = append(errs, errors.New("consumer token is not 16 random lowercase hex digits (start from DefaultConfig)"))
	}
	if c.LeaseTTL < 500*time.Millisecond || c.LeaseTTL > 5*time.Minute {
		errs = append(errs, fmt.Errorf("lease TTL %s is outside 500ms..5m (ALICIA_PERSISTENCE_LEASE_TTL)", c.LeaseTTL))
	}
	if c.Shards < 1 || c.Shards > 64 {
		errs = append(errs, fmt.Errorf("shards %d is outside 1..64", c.Shards))
	}
	return errors.Join(errs...)
}

// InstanceConsumer is the name of this instance's consumer on both streams,
// <Consumer>-<Instance>-<ConsumerToken> (telemetry.InstanceConsumer):
// instances do not share one (the position lives in the database, per
// partition). Its lag is exported under <Consumer>-<Instance>
// (telemetry.ConsumerLabel), the same across restarts.
func (c Config) InstanceConsumer() string {
	return telemetry.InstanceConsumer(c.Consumer, c.Instance, c.ConsumerToken)
}

// defaultInstance is host-pid, reduced to what a consumer name may hold.
func defaultInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "persistence"
	}
	id := []byte(fmt.Sprintf("%s-%d", host, os.Getpid()))
	for i, b := range id {
		if !instanceByte(b) {
			id[i] = '_'
		}
	}
	if len(id) > 64 {
		id = id[len(id)-64:]
	}
	return string(id)
}

func instanceByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
}

func validInstance(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		if !instanceByte(s[i]) {
			return false
		}
	}
	return true
}

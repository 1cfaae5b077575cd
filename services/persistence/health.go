package persistence

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// serveHealth serves /metrics and /healthz at cfg.MetricsAddr when it is
// set: healthy while NATS is connected, Postgres answers and the partition
// leases are renewed, until ctx ends (draining). stop is a no-op without
// an address.
func serveHealth(ctx context.Context, cfg Config, nc *nats.Conn, js jetstream.JetStream, pg func(context.Context) error, leases func() bool, log zerolog.Logger) (stop func(), err error) {
	if cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	stopMetrics, err := telemetry.ServeMetrics(cfg.MetricsAddr, false, log,
		svcmain.Draining(ctx),
		telemetry.NATSConnected(nc),
		telemetry.HealthCheck{Name: "postgres", Check: pg},
		telemetry.HealthCheck{Name: "leases", Check: func(context.Context) error {
			if !leases() {
				return errors.New("the partition leases have not been renewed within a lease")
			}
			return nil
		}},
	)
	if err != nil {
		return nil, err
	}
	// Its lag is how far the database is behind the streams; the
	// DEADLETTER stream's size is watched here too (no consumer reads it).
	unwatch, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: log,
		Consumers: map[string][]string{bus.StreamConversations: {cfg.InstanceConsumer()}, bus.StreamSystem: {cfg.InstanceConsumer()}, bus.StreamDeadLetter: nil}})
	if err != nil {
		stopMetrics()
		return nil, err
	}
	return func() { unwatch(); stopMetrics() }, nil
}

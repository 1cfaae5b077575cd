package memory

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// serveHealth serves /metrics and /healthz at cfg.MetricsAddr when it is
// set: healthy while NATS is connected, Postgres answers, the durable
// consumers the service reads exist and it is not draining (ctx, the run
// context, has not ended). stop is a no-op without an address.
func serveHealth(ctx context.Context, cfg Config, nc *nats.Conn, js jetstream.JetStream, pg func(context.Context) error, extraction bool, log zerolog.Logger) (stop func(), err error) {
	if cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	checks := []telemetry.HealthCheck{
		svcmain.Draining(ctx),
		telemetry.NATSConnected(nc),
		{Name: "postgres", Check: pg},
		telemetry.ConsumerExists(bus.StreamConversations, cfg.ActionConsumer, js.Consumer),
	}
	if extraction {
		checks = append(checks, telemetry.ConsumerExists(bus.StreamConversations, cfg.ExtractionConsumer, js.Consumer))
	}
	consumers := []string{cfg.ActionConsumer}
	if extraction {
		consumers = append(consumers, cfg.ExtractionConsumer)
	}
	stopMetrics, err := telemetry.ServeMetrics(cfg.MetricsAddr, false, log, checks...)
	if err != nil {
		return nil, err
	}
	unwatch, err := telemetry.RegisterConsumerLag(&telemetry.ConsumerLag{JS: js, Log: log,
		Consumers: map[string][]string{bus.StreamConversations: consumers}})
	if err != nil {
		stopMetrics()
		return nil, err
	}
	return func() { unwatch(); stopMetrics() }, nil
}

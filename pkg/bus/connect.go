package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connect is how a service joins the bus: a NATS connection named after the
// service that reconnects forever, its JetStream context, and the streams
// created or updated. Close the connection when done.
func Connect(ctx context.Context, url, service string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name("alicia-"+service), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: nats %s: %w", service, url, err)
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = EnsureStreams(ctx, js, StreamsConfig{})
	}
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%s: jetstream: %w", service, err)
	}
	return nc, js, nil
}

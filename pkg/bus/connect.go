package bus

import (
	"context"
	"fmt"
	"net/url"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connect is how a service joins the bus: a NATS connection named after the
// service that reconnects forever, its JetStream context, and the streams:
// created or updated by the StreamsOwner (EnsureStreams), created when
// missing by every other service (CreateStreams), both with streams (the
// service's svcmain.Bus.Streams: every service has the same). opts add to the
// connection's options, e.g. the service's Credentials.Option(). Close the
// connection when done.
func Connect(ctx context.Context, natsURL, service string, streams StreamsConfig, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(natsURL, append([]nats.Option{nats.Name("alicia-" + service), nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: nats %s: %w", service, redacted(natsURL), err)
	}
	js, err := jetstream.New(nc)
	if err == nil {
		if service == StreamsOwner {
			err = EnsureStreams(ctx, js, streams)
		} else {
			err = CreateStreams(ctx, js, streams)
		}
	}
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%s: jetstream: %w", service, err)
	}
	return nc, js, nil
}

// redacted hides the password of a URL with userinfo.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

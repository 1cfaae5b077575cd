package svcmain

import (
	"errors"
	"fmt"
	"net"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
)

// The blocks of configuration several services read the same way, each
// defined once here and embedded in the services' Configs (their fields
// are promoted: cfg.NATSURL, cfg.MetricsAddr). The database's,
// pgread.Postgres, is beside the pools of the services that use one.

// DefaultNATSURL is where every service looks for NATS by default.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// Bus is the NATS connection of a service: the server, the user it logs
// in as (pkg/natsauth gives each service its own) and the streams'
// settings, the same in every service (bus.Connect ensures or creates the
// streams with them; the KV buckets take their replica count).
type Bus struct {
	NATSURL string // ALICIA_NATS_URL, default DefaultNATSURL
	// NATSAuth logs in to NATS (ALICIA_NATS_USER, ALICIA_NATS_PASSWORD + _FILE).
	NATSAuth bus.Credentials
	// Streams are ALICIA_STREAM_MAX_AGE, ALICIA_CONVERSATIONS_MAX_BYTES,
	// ALICIA_SYSTEM_MAX_BYTES and ALICIA_STREAM_REPLICAS (bus.StreamsConfig.From).
	Streams bus.StreamsConfig
}

// DefaultBus returns the defaults.
func DefaultBus() Bus { return Bus{NATSURL: DefaultNATSURL, Streams: bus.DefaultStreams()} }

// From overrides b from src.
func (b *Bus) From(src config.Source) error {
	src.String("ALICIA_NATS_URL", &b.NATSURL)
	return errors.Join(b.NATSAuth.From(src), b.Streams.From(src))
}

// Validate reports what is wrong with b.
func (b Bus) Validate() error {
	if b.NATSURL == "" {
		return errors.New("NATS URL is empty (ALICIA_NATS_URL)")
	}
	return nil
}

// Metrics is where a service serves /metrics, /healthz and /livez on an
// address of its own; each service names its variable
// (ALICIA_<SERVICE>_METRICS_ADDR, default none).
type Metrics struct {
	MetricsAddr string
}

// From sets m from the variable name of src.
func (m *Metrics) From(src config.Source, name string) {
	src.String(name, &m.MetricsAddr)
}

// Validate reports an address that is set and not host:port; name is its
// variable.
func (m Metrics) Validate(name string) error {
	if m.MetricsAddr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(m.MetricsAddr); err != nil {
		return fmt.Errorf("%s %q: %w", name, m.MetricsAddr, err)
	}
	return nil
}

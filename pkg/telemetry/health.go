package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HealthCheck is one condition a service's GET /healthz checks (on its
// metrics address, ServeMetrics): nil when it holds. Checks are cheap — a
// flag, a connection state, one round trip to a server — because container
// healthchecks call them every few seconds.
type HealthCheck struct {
	Name  string
	Check func(context.Context) error
}

// HealthTimeout bounds all of one /healthz request's checks together.
const HealthTimeout = 2 * time.Second

// errNATSDisconnected is what NATSConnected reports.
var errNATSDisconnected = errors.New("not connected")

// NATSConnected checks that the service's NATS connection is up (it
// reconnects by itself; while it cannot, the service consumes nothing).
func NATSConnected(nc interface{ IsConnected() bool }) HealthCheck {
	return HealthCheck{Name: "nats", Check: func(context.Context) error {
		if !nc.IsConnected() {
			return errNATSDisconnected
		}
		return nil
	}}
}

// healthHandler answers 200 "ok" when every check passes within
// HealthTimeout, else 503 with one "name: error" line per failure. Without
// checks it answers 200: the process serves HTTP.
func healthHandler(checks []HealthCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), HealthTimeout)
		defer cancel()
		var failed []string
		for _, c := range checks {
			if err := c.Check(ctx); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", c.Name, err))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(failed, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// ConsumerExists checks, with one request to JetStream, that the durable
// consumer name on stream still exists: the service consumes through it,
// and a JetStream that lost its state (or an operator's delete) would leave
// the service connected but idle. lookup is jetstream.JetStream's Consumer.
func ConsumerExists[C any](stream, name string, lookup func(ctx context.Context, stream, name string) (C, error)) HealthCheck {
	return HealthCheck{Name: "consumer " + stream + "/" + name, Check: func(ctx context.Context) error {
		_, err := lookup(ctx, stream, name)
		return err
	}}
}

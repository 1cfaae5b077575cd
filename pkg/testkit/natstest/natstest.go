// Package natstest runs an embedded NATS server with JetStream for tests:
// 127.0.0.1 only, a random port, its store in a temporary directory, fsync
// on every write (Alicia's durability rule), stopped when the test ends.
package natstest

import (
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Run starts an embedded JetStream server whose store is in t.TempDir().
// It is shut down at cleanup.
func Run(t testing.TB) *server.Server {
	t.Helper()
	return RunWithDir(t, t.TempDir())
}

// RunWithDir starts an embedded JetStream server with its store in dir, so a
// test can stop a server and start a new one on the same data (restart
// tests). It is shut down at cleanup; shutting it down earlier (Shutdown and
// WaitForShutdown) is fine.
func RunWithDir(t testing.TB, dir string) *server.Server {
	t.Helper()
	opts := &server.Options{
		ServerName: "alicia-test",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		// ALICIA_NATS_FSYNC=default (benchmarks only) measures what fsync
		// on every write costs against NATS's default two-minute interval.
		SyncAlways: os.Getenv("ALICIA_NATS_FSYNC") != "default",
		// Room for an over-limit envelope (protocol max 1 MiB) to reach the
		// consumers that must reject it, as on the dev server.
		MaxPayload: 8 << 20,
		NoLog:      true,
		NoSigs:     true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("natstest: server not ready for connections after 10s")
	}
	if !s.JetStreamEnabled() {
		t.Fatalf("natstest: JetStream is not enabled")
	}
	return s
}

// Connect connects to s; the connection is closed at cleanup.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on nc.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

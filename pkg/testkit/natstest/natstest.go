// Package natstest runs an embedded NATS server with JetStream for tests:
// 127.0.0.1 only, a random port, its store in a temporary directory, fsync
// on every write (Alicia's durability rule), stopped when the test ends.
package natstest

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/testkit"
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

// RunCluster starts n JetStream servers named <name>-1…<name>-n, routed to
// each other on 127.0.0.1 (cluster name), each with its store in a
// temporary directory and fsync on every write, and returns once they are
// routed with a JetStream meta leader. They are shut down at cleanup;
// shutting one down earlier (a node loss) is fine.
func RunCluster(t testing.TB, n int, name string) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	var routes []string
	for i := range ports {
		_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
		ports[i], _ = strconv.Atoi(port)
		routes = append(routes, "nats-route://127.0.0.1:"+port)
	}
	var out []*server.Server
	for i := range n {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("%s-%d", name, i+1), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, MaxPayload: 8 << 20,
			Cluster: server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")), NoLog: true, NoSigs: true,
		})
		if err != nil {
			t.Fatalf("natstest: cluster server %d: %v", i+1, err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("natstest: cluster server %d not ready", i+1)
		}
		out = append(out, s)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		leader := false
		for _, s := range out {
			if s.NumRoutes() < n-1 || !s.JetStreamIsCurrent() {
				return false
			}
			leader = leader || s.JetStreamIsLeader()
		}
		return leader
	}, "natstest: cluster routed with a JetStream meta leader")
	return out
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

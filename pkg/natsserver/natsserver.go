// Package natsserver runs the embedded NATS server with JetStream that the
// dev stack (`alicia up`) uses, with fsync on every write.
package natsserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// Options of the embedded server.
type Options struct {
	// URL to listen on, e.g. nats://127.0.0.1:4222.
	URL string
	// StoreDir holds the JetStream file store.
	StoreDir string
	// SyncInterval, when > 0, replaces fsync-on-every-write with a periodic
	// fsync. Acknowledged writes can then be lost on an OS crash (Jepsen,
	// NATS 2.12.1), so it exists only to measure the cost of durability.
	SyncInterval time.Duration
	// Users, when not empty, turn authentication on: only these users may
	// connect, each with its permissions (pkg/natsauth). Empty, anyone
	// may connect and do anything.
	Users []User
}

// User is one user of the server.
type User struct {
	Name, Password string
	natsauth.Permissions
}

// serverUsers converts users for server.Options.
func serverUsers(users []User) []*server.User {
	var out []*server.User
	for _, u := range users {
		p := &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: u.Publish, Deny: u.PublishDeny},
			Subscribe: &server.SubjectPermission{Allow: u.Subscribe, Deny: u.SubscribeDeny},
		}
		if u.Responses {
			p.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: 2 * time.Minute}
		}
		out = append(out, &server.User{Username: u.Name, Password: u.Password, Permissions: p})
	}
	return out
}

// Start starts the server and waits until it accepts connections.
func Start(o Options) (*server.Server, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("natsserver: bad URL %q", o.URL)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, fmt.Errorf("natsserver: URL %q has no port", o.URL)
	}
	if o.StoreDir == "" {
		return nil, errors.New("natsserver: StoreDir is empty")
	}
	opts := &server.Options{
		ServerName: "alicia-dev",
		Host:       u.Hostname(),
		Port:       port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		SyncAlways: o.SyncInterval <= 0,
		SyncInterval: func() time.Duration {
			if o.SyncInterval > 0 {
				return o.SyncInterval
			}
			return 0
		}(),
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
		Users:      serverUsers(o.Users),
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil && u.Hostname() != "localhost" {
		return nil, fmt.Errorf("natsserver: listen host %q is not an IP address", u.Hostname())
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("natsserver: not ready on %s", o.URL)
	}
	return s, nil
}

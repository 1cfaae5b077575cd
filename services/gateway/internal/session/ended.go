package session

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// KeyOf is the bucket key of session id: what the connections a session
// opened are known by (WatchEnded reports it).
func KeyOf(id string) string { return key(id) }

// WatchEnded calls ended with the bucket key of every session that ends
// from now on, on any replica: signed out, ended by a newer sign-in of its
// user beyond PerUser, or expired (the bucket's TTL leaves a marker). It
// returns once the watch is set up; the watch runs until ctx ends, then
// done is closed. ended runs on the watch's goroutine: it must not block.
//
// The watch is an ordered consumer of the bucket: cut off from NATS, it
// resumes where it was, so a replica misses no end.
func (s *Store) WatchEnded(ctx context.Context, ended func(key string)) (done <-chan struct{}, err error) {
	// Session keys are one token; users' indexes ("u.…") are two.
	w, err := s.kv.Watch(ctx, "*", jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, fmt.Errorf("session: watch the bucket: %w", err)
	}
	c := make(chan struct{})
	go func() {
		defer close(c)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
					ended(e.Key())
				}
			}
		}
	}()
	return c, nil
}

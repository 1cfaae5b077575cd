package testkit

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// Service is a service's Run function running in the background of a test.
type Service struct {
	t      testing.TB
	name   string
	cancel context.CancelFunc
	exited chan struct{}
	err    error
	once   sync.Once
}

// Go runs run(ctx) in the background until Stop or the end of the test
// (services started later are stopped first). An error other than
// context.Canceled fails the test.
func Go(t testing.TB, name string, run func(ctx context.Context) error) *Service {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{t: t, name: name, cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(s.exited)
		s.err = run(ctx)
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop cancels the service and waits for it to return; it reports a failure
// once.
func (s *Service) Stop() {
	s.once.Do(func() {
		s.cancel()
		<-s.exited
		if s.err != nil && !errors.Is(s.err, context.Canceled) {
			s.t.Errorf("%s: %v", s.name, s.err)
		}
	})
}

// Exited is closed when the service's Run returned (by itself or stopped).
func (s *Service) Exited() <-chan struct{} { return s.exited }

// Err is what Run returned; valid once Exited is closed.
func (s *Service) Err() error {
	<-s.exited
	return s.err
}

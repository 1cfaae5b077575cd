package svcmain

import (
	"context"
	"errors"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// DefaultShutdownTimeout is how long a service drains after SIGTERM unless
// ALICIA_SHUTDOWN_TIMEOUT says otherwise: with HandBackTime it stays well
// under Kubernetes' default terminationGracePeriodSeconds (30 s), after
// which the kubelet sends SIGKILL and nothing is handed back any more.
const DefaultShutdownTimeout = 20 * time.Second

// HandBackTime is how long Serve still waits, once the stop is forced, for
// the service to hand back what it holds (nak its messages, release its
// leases) and return.
const HandBackTime = 5 * time.Second

// ShutdownTimeoutFromEnv reads ALICIA_SHUTDOWN_TIMEOUT (a Go duration; 0
// forces the stop at once, handing back whatever is held).
func ShutdownTimeoutFromEnv() (time.Duration, error) {
	d := DefaultShutdownTimeout
	if err := config.Duration("ALICIA_SHUTDOWN_TIMEOUT", &d); err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, errors.New("ALICIA_SHUTDOWN_TIMEOUT is negative")
	}
	return d, nil
}

type workKey struct{}

func withWork(ctx, work context.Context) context.Context {
	return context.WithValue(ctx, workKey{}, work)
}

// WorkContext is the context for work a service took before ctx (the run
// context Serve gives it) ended: it carries on through the drain and ends
// when the stop is forced, which is when the service hands back (naks,
// releases) what it still holds. It has ctx's values.
//
// Outside Serve (a test calling a service's Run with its own context) there
// is no drain: WorkContext ends with ctx.
func WorkContext(ctx context.Context) context.Context {
	work, ok := ctx.Value(workKey{}).(context.Context)
	if !ok {
		return ctx
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	context.AfterFunc(work, cancel)
	return wctx
}

// Forced is closed when the stop is forced (the shutdown timeout passed or
// a second signal came): a service with a grace of its own (the llm's
// ALICIA_LLM_SHUTDOWN_GRACE) hands back what it holds then. It is nil —
// never closed — outside Serve.
func Forced(ctx context.Context) <-chan struct{} {
	work, ok := ctx.Value(workKey{}).(context.Context)
	if !ok {
		return nil
	}
	return work.Done()
}

// ErrDraining is what Draining reports once the service is stopping.
var ErrDraining = errors.New("draining: stopping after a signal, taking no new work")

// Draining is a health check that fails once ctx (the run context) ended,
// so that a load balancer or Kubernetes' readiness probe stops sending the
// instance work while it drains.
func Draining(ctx context.Context) telemetry.HealthCheck {
	return telemetry.HealthCheck{Name: "drain", Check: func(context.Context) error {
		if ctx.Err() != nil {
			return ErrDraining
		}
		return nil
	}}
}

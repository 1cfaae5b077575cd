// Package svcmain is the main function of every service binary
// (services/*/cmd/*): a logger named after the service, the configuration
// from the environment, and a run until SIGINT or SIGTERM followed by a
// drain (drain.go). It also holds the blocks of configuration every
// service embeds in its Config (config.go: Bus, Metrics).
package svcmain

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Exit codes of a service binary.
const (
	ExitFailed = 1 // the service stopped with an error
	ExitConfig = 2 // the configuration is invalid; nothing was started
	ExitForced = 3 // the drain did not finish: a second signal or ALICIA_SHUTDOWN_TIMEOUT forced the stop
)

// Main loads the service's configuration, runs it until SIGINT or SIGTERM
// and exits: 0 after a clean stop, ExitConfig or ExitFailed with the error
// logged. `<binary> healthcheck URL` probes a running instance instead.
func Main[C any](name string, load func() (C, error), run func(context.Context, C, zerolog.Logger) error) {
	if len(os.Args) > 1 && os.Args[1] == HealthcheckCommand { // health.go
		os.Exit(Healthcheck(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(Serve(name, load, run))
}

// Serve is Main without the exit: it returns the exit code.
//
// The first SIGINT or SIGTERM ends the context run gets: the service stops
// taking new work. Work it already holds runs on WorkContext(ctx), which
// lasts until the shutdown timeout has passed or a second signal came; then
// it ends too, the service hands back what is left, and Serve exits
// ExitForced once run returns (or HandBackTime later).
func Serve[C any](name string, load func() (C, error), run func(context.Context, C, zerolog.Logger) error) int {
	lc, lerr := telemetry.LogConfigFromEnv()
	log := telemetry.NewLogger(name, lc)
	timeout, terr := ShutdownTimeoutFromEnv()
	cfg, err := load()
	if err = errors.Join(lerr, terr, err); err != nil {
		log.Error().Err(err).Msg("configuration")
		return ExitConfig
	}
	// Traces: exported over OTLP when the OTEL_* environment asks for it;
	// the spans ended before the stop are flushed on the way out.
	shutdownTracing, err := telemetry.SetupTracing(context.Background(), name)
	if err != nil {
		log.Error().Err(err).Msg("tracing")
		return ExitConfig
	}
	defer func() {
		if err := shutdownTracing(context.Background()); err != nil {
			log.Warn().Err(err).Msg("tracing: flushing spans")
		}
	}()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	work, force := context.WithCancel(context.Background())
	defer force()
	ctx, drain := context.WithCancel(withWork(context.Background(), work))
	defer drain()

	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, log) }()
	exit := func(err error) int {
		if err != nil {
			log.Error().Err(err).Msg(name + " stopped")
			return ExitFailed
		}
		return 0
	}

	select {
	case err := <-done:
		return exit(err)
	case sig := <-signals:
		log.Info().Str("signal", sig.String()).Dur("timeout", timeout).Msg("draining: no new work; finishing or handing back what is held")
	}
	drain()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case err := <-done:
		return exit(err)
	case sig := <-signals:
		log.Warn().Str("signal", sig.String()).Msg("second signal: forcing the stop; handing back what is still held")
	case <-deadline.C:
		log.Warn().Dur("timeout", timeout).Msg("shutdown timeout: forcing the stop; handing back what is still held")
	}
	force()
	select {
	case err := <-done:
		if err != nil {
			log.Error().Err(err).Msg(name + " stopped")
		}
	case <-time.After(HandBackTime):
		log.Error().Dur("waited", HandBackTime).Msg(name + " did not stop after the forced stop; exiting anyway")
	}
	return ExitForced
}

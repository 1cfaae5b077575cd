// Package svcmain is the main function of every service binary
// (services/*/cmd/*): a logger named after the service, the configuration
// from the environment, and a run until SIGINT or SIGTERM.
package svcmain

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Exit codes of a service binary.
const (
	ExitFailed = 1 // the service stopped with an error
	ExitConfig = 2 // the configuration is invalid; nothing was started
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
func Serve[C any](name string, load func() (C, error), run func(context.Context, C, zerolog.Logger) error) int {
	lc, lerr := telemetry.LogConfigFromEnv()
	log := telemetry.NewLogger(name, lc)
	cfg, err := load()
	if err = errors.Join(lerr, err); err != nil {
		log.Error().Err(err).Msg("configuration")
		return ExitConfig
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg(name + " stopped")
		return ExitFailed
	}
	return 0
}

package svcmain_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/svcmain"
)

type config struct{ addr string }

func TestServeExitCodes(t *testing.T) {
	badConfig := func() (config, error) { return config{}, errors.New("ALICIA_X: not a number") }
	good := func() (config, error) { return config{addr: "127.0.0.1:1"}, nil }
	ran := false
	if code := svcmain.Serve("x", badConfig, func(context.Context, config, zerolog.Logger) error { ran = true; return nil }); code != svcmain.ExitConfig || ran {
		t.Errorf("bad configuration: exit %d, ran %v; want %d without running", code, ran, svcmain.ExitConfig)
	}
	if code := svcmain.Serve("x", good, func(context.Context, config, zerolog.Logger) error { return errors.New("nats: no servers") }); code != svcmain.ExitFailed {
		t.Errorf("run error: exit %d, want %d", code, svcmain.ExitFailed)
	}
	var got config
	if code := svcmain.Serve("x", good, func(_ context.Context, c config, _ zerolog.Logger) error { got = c; return nil }); code != 0 || got.addr != "127.0.0.1:1" {
		t.Errorf("clean stop: exit %d, config %+v", code, got)
	}
}

func TestServeStopsOnSIGTERM(t *testing.T) {
	code := svcmain.Serve("x", func() (config, error) { return config{}, nil }, func(ctx context.Context, _ config, _ zerolog.Logger) error {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("SIGTERM did not end the run context")
		}
	})
	if code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
}

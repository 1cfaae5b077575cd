package persistence_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the service consumes both streams, unhealthy (naming why) when a
// consumer is gone.
func TestHealthz(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newStack(t)
	s.cfg.MetricsAddr = addr
	s.start()
	healthz := func(want int, wantBody string) func() error {
		return func() error {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != want || !strings.Contains(string(body), wantBody) {
				return fmt.Errorf("%d %q", resp.StatusCode, body)
			}
			return nil
		}
	}
	testkit.EventuallyNoError(t, 20*time.Second, healthz(http.StatusOK, "ok"), "healthy")
	if err := s.js.DeleteConsumer(context.Background(), bus.StreamSystem, s.cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "consumer "+bus.StreamSystem+"/"+s.cfg.Consumer),
		"unhealthy without its consumer")
}

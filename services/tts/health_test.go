package tts_test

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
	"github.com/alicia-voice/alicia/services/tts"
)

// The container healthcheck probes /healthz on the metrics address: healthy
// while the service consumes, unhealthy (naming why) when its consumer is gone.
func TestHealthz(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := newHarness(t, func(c *tts.Config) { c.MetricsAddr = addr })
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
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusOK, "ok"), "healthy")
	if err := h.js.DeleteConsumer(context.Background(), bus.StreamConversations, h.cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 10*time.Second, healthz(http.StatusServiceUnavailable, "consumer "+bus.StreamConversations+"/"+h.cfg.Consumer),
		"unhealthy without its consumer")
}

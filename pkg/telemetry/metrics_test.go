package telemetry_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/telemetry"
)

func TestServeMetrics(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "alicia_test_served_total", Help: "test"})
	prometheus.MustRegister(c)
	defer prometheus.Unregister(c)
	c.Add(3)
	for _, profiles := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		stop, err := telemetry.ServeMetrics(addr, profiles, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "alicia_test_served_total 3") {
			t.Fatalf("metrics without the counter:\n%s", body)
		}
		resp, err = http.Get("http://" + addr + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.StatusCode == http.StatusOK; got != profiles {
			t.Fatalf("profiles=%v: /debug/pprof/ answered %d", profiles, resp.StatusCode)
		}
		stop()
		if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
			t.Fatal("still serving after stop")
		}
	}
	if _, err := telemetry.ServeMetrics("256.0.0.1:1", false, zerolog.Nop()); err == nil {
		t.Fatal("bad address accepted")
	}
}

package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// ServeMetrics serves the default Prometheus registry on GET /metrics at
// addr (a service's private metrics address), the health checks on GET
// /healthz (health.go: NATS, the consumers, Postgres; for readiness), GET
// /livez (whether the process serves HTTP, and nothing else: for liveness,
// so that a dependency's outage restarts nothing), and CPU profiles under
// /debug/pprof/ when profiles is set. stop shuts it down.
func ServeMetrics(addr string, profiles bool, log zerolog.Logger, checks ...HealthCheck) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.Handle("GET /healthz", healthHandler(checks))
	mux.HandleFunc("GET /livez", Live)
	if profiles {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// Live answers GET /livez: 200 "ok" while the process serves HTTP. It
// checks no dependency.
func Live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

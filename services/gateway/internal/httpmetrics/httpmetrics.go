// Package httpmetrics counts the gateway's HTTP requests and times them, by
// route (the registered path, never the request's: bounded labels),
// method and status.
package httpmetrics

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	once     sync.Once
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
)

// Register registers the metrics on the default registry (once).
func Register() {
	once.Do(func() {
		requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "gateway", Name: "http_requests_total",
			Help: "HTTP requests answered, by route (the registered path, e.g. /v1/conversations/:id; unmatched for none), method and status."},
			[]string{"route", "method", "status"})
		duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "gateway", Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route and method (WebSocket and event-stream connections, which last as long as they are open, are counted in alicia_gateway_http_requests_total only).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}},
			[]string{"route", "method"})
		prometheus.DefaultRegisterer.MustRegister(requests, duration)
	})
}

// Middleware records every request once the handler (and the error
// handler's answer) is done.
func Middleware() echo.MiddlewareFunc {
	Register()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				// Answered now, so the status is the one the client gets.
				c.Error(err)
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			method := c.Request().Method
			status := c.Response().Status
			if !c.Response().Committed && err != nil {
				status = http.StatusInternalServerError
				var he *echo.HTTPError
				if errors.As(err, &he) {
					status = he.Code
				}
			}
			requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
			if !long(c, route) {
				duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
			}
			return nil
		}
	}
}

// long reports whether the request was a connection held open (a
// WebSocket, an event stream): its time is the connection's life.
func long(c echo.Context, route string) bool {
	return strings.HasSuffix(route, "/ws") || strings.HasSuffix(route, "/stream") ||
		strings.HasPrefix(c.Response().Header().Get(echo.HeaderContentType), "text/event-stream") ||
		c.Response().Status == http.StatusSwitchingProtocols
}

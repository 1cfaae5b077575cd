package edge

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	refusalsOnce sync.Once
	refusalsVec  *prometheus.CounterVec
)

// Reasons of refusals besides the budget names.
const (
	RefusedEnvelopeRate = "envelope_rate" // Limits: envelopes per second (504)
	RefusedFlooding     = "flooding"      // a client disconnected for flooding
	RefusedBacklog      = "backlog"       // the stream too far ahead of persistence
)

// RefusalMetrics registers (once) and returns the counter of client input
// an edge refused, by reason: envelope_rate, flooding, or a budget's name.
// Edges call it at start, so the series exist before the first refusal.
func RefusalMetrics() *prometheus.CounterVec {
	refusalsOnce.Do(func() {
		refusalsVec = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "edge", Name: "refusals_total",
			Help: "Client input an edge (WebSocket, data channel, REST writes) refused, by reason: envelope_rate, flooding, backlog (the stream too far ahead of persistence), or the budget it was over."},
			[]string{"reason"})
		prometheus.DefaultRegisterer.MustRegister(refusalsVec)
	})
	return refusalsVec
}

func refused(reason string) { RefusalMetrics().WithLabelValues(reason).Inc() }

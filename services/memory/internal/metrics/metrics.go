// Package metrics holds the memory service's Prometheus metrics, registered
// once on the default registry (so one process running several replicas,
// like the dev launcher, shares them).
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the memory service.
type Metrics struct {
	// SearchPrefetch: memory.search requests by what the search prefetched
	// for a user message gave them (hit, miss, stale, failed).
	SearchPrefetch *prometheus.CounterVec
}

var (
	once sync.Once
	def  *Metrics
)

// Default returns the metrics registered on prometheus.DefaultRegisterer.
func Default() *Metrics {
	once.Do(func() {
		def = &Metrics{
			SearchPrefetch: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "memory", Name: "search_prefetch_total",
				Help: "memory.search requests by what the search started when the user message was published gave them: hit (answered from it, finished or waited for), miss (none for the request's user, query, top-k and threshold), stale (one was there but a memory write, a reconnection or its age ruled it out; its embedding was reused), failed (it failed; searched again)."},
				[]string{"outcome"}),
		}
		prometheus.DefaultRegisterer.MustRegister(def.SearchPrefetch)
	})
	return def
}

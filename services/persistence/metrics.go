package persistence

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the persistence service, registered once on the default
// registry (the dev launcher and the tests run several instances in one
// process).
type metrics struct {
	// StreamResets counts the stored offsets found to belong to another
	// stream (a new JetStream store or cluster), by stream: the stream was
	// then applied from its first message instead of skipping to the offset.
	StreamResets *prometheus.CounterVec
	// StreamEpoch is the epoch of the stream being applied, by stream: how
	// many different streams of that name this database has consumed before.
	StreamEpoch *prometheus.GaugeVec
	// Instances is how many persistence instances share the partitions,
	// as this one last saw; PartitionsHeld how many of them it applies.
	Instances      prometheus.Gauge
	PartitionsHeld prometheus.Gauge
	// AppliedSeq is how far each stream is applied in every partition;
	// StreamFirstSeq the stream's first sequence (above AppliedSeq+1:
	// envelopes were dropped unapplied); BacklogBytes the estimated bytes
	// not applied yet, against StreamMaxBytes (-1: no limit). By stream.
	AppliedSeq     *prometheus.GaugeVec
	StreamFirstSeq *prometheus.GaugeVec
	BacklogBytes   *prometheus.GaugeVec
	StreamMaxBytes *prometheus.GaugeVec
}

var (
	metricsOnce sync.Once
	defMetrics  *metrics
)

func defaultMetrics() *metrics {
	metricsOnce.Do(func() {
		defMetrics = &metrics{
			StreamResets: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "stream_resets_total",
				Help: "Stored offsets that belonged to another stream of the same name (a new JetStream store or cluster); the stream was applied from its first message.",
			}, []string{"stream"}),
			StreamEpoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "stream_epoch",
				Help: "How many different streams of this name the database had consumed before the one being applied.",
			}, []string{"stream"}),
			Instances: prometheus.NewGauge(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "instances",
				Help: "Persistence instances alive (seen within a lease) sharing the partitions, as this instance last saw.",
			}),
			PartitionsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "partitions_held",
				Help: "Partitions (of CONVERSATIONS and SYSTEM together) this instance holds the lease of and applies.",
			}),
			AppliedSeq: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "applied_seq",
				Help: "Stream sequence up to which every envelope is applied in every partition, as this instance last knew.",
			}, []string{"stream"}),
			StreamFirstSeq: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "stream_first_seq",
				Help: "First sequence the stream still holds; above alicia_persistence_applied_seq + 1, envelopes were dropped before they were applied.",
			}, []string{"stream"}),
			BacklogBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "backlog_bytes",
				Help: "Estimated bytes of the stream's envelopes not applied yet: (last sequence - applied) x average envelope size.",
			}, []string{"stream"}),
			StreamMaxBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "alicia", Subsystem: "persistence", Name: "stream_max_bytes",
				Help: "The stream's size limit, beyond which its oldest envelopes are dropped (-1: none).",
			}, []string{"stream"}),
		}
		prometheus.MustRegister(defMetrics.StreamResets, defMetrics.StreamEpoch, defMetrics.Instances, defMetrics.PartitionsHeld,
			defMetrics.AppliedSeq, defMetrics.StreamFirstSeq, defMetrics.BacklogBytes, defMetrics.StreamMaxBytes)
	})
	return defMetrics
}

// RegisterMetrics registers the service's metrics on the default registry
// (Run registers them too). deploy/METRICS.md, the table of every
// service's metrics, is made from what it registers.
func RegisterMetrics() { defaultMetrics() }

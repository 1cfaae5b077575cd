// Package metrics holds the asr's Prometheus metrics, registered once on the
// default registry (so one process running several replicas, like the dev
// launcher or the tests, shares them).
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the asr service.
type Metrics struct {
	// RequestDuration: one transcription request, retries included, by
	// kind (partial, final) and outcome (ok, unavailable, rejected, canceled).
	RequestDuration *prometheus.HistogramVec
	// SpeechEndToFinal: the end-pointer's decision (ASRJob.speechEndMs) →
	// the final Transcription stored in JetStream.
	SpeechEndToFinal prometheus.Histogram
	// QueueWait: job made (ASRJob.createdAt) → taken by a worker, by kind.
	QueueWait *prometheus.HistogramVec
	// Jobs by kind (partial, speculative, final) and outcome (published,
	// user_message, stale, empty, low_confidence, duplicate, unavailable,
	// rejected, malformed, failed, retry).
	Jobs *prometheus.CounterVec
	// Reused: transcripts published without a transcription of their own, by
	// source: partial (a speculative job took an in-flight partial's
	// transcript), partial_failed (it waited for one that failed, then
	// transcribed itself), speculative (a final job carried its speculative
	// job's transcript).
	Reused *prometheus.CounterVec
	// ReuseWaiting: speculative jobs waiting for an in-flight partial.
	ReuseWaiting prometheus.Gauge
	// Confidence of final transcripts.
	Confidence prometheus.Histogram
	// InFlight is the number of jobs being worked on.
	InFlight prometheus.Gauge
}

var (
	once sync.Once
	def  *Metrics
)

// Default returns the metrics registered on prometheus.DefaultRegisterer.
func Default() *Metrics {
	once.Do(func() {
		latency := []float64{.005, .01, .025, .05, .1, .15, .2, .3, .5, .75, 1, 1.5, 2.5, 5, 10, 30}
		def = &Metrics{
			RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "asr", Name: "request_duration_seconds",
				Help: "Time of one transcription request to the backend, retries included.", Buckets: latency}, []string{"kind", "outcome"}),
			SpeechEndToFinal: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "asr", Name: "speech_end_to_final_seconds",
				Help: "Time from the end of the user's speech to the final transcript stored in JetStream.", Buckets: latency}),
			QueueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "asr", Name: "queue_wait_seconds",
				Help: "Time from a job's creation to a worker taking it.", Buckets: latency}, []string{"kind"}),
			Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "asr", Name: "jobs_total",
				Help: "ASR jobs by kind and outcome."}, []string{"kind", "outcome"}),
			Reused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "asr", Name: "reused_transcripts_total",
				Help: "Transcripts published without a transcription of their own, by source (partial, partial_failed, speculative)."}, []string{"source"}),
			ReuseWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "asr", Name: "speculative_waiting",
				Help: "Speculative jobs waiting for the transcript of an in-flight partial of their utterance."}),
			Confidence: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "asr", Name: "final_confidence",
				Help: "Confidence of final transcripts.", Buckets: prometheus.LinearBuckets(0.1, 0.1, 10)}),
			InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "asr", Name: "jobs_in_flight",
				Help: "ASR jobs being worked on."}),
		}
		prometheus.DefaultRegisterer.MustRegister(def.RequestDuration, def.SpeechEndToFinal, def.QueueWait, def.Jobs, def.Reused, def.ReuseWaiting, def.Confidence, def.InFlight)
	})
	return def
}

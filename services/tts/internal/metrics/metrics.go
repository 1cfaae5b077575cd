// Package metrics holds the tts's Prometheus metrics, registered once on the
// default registry (so one process running several replicas, like the dev
// launcher, shares them).
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the tts service.
type Metrics struct {
	// FirstByte: synthesis request sent → first audio bytes back, by engine.
	FirstByte *prometheus.HistogramVec
	// Synthesis: synthesis request sent → the sentence's last audio byte, by engine.
	Synthesis *prometheus.HistogramVec
	// SentenceToAudio: AssistantSentence stored in JetStream → its first
	// SpeechAudio chunk published.
	SentenceToAudio prometheus.Histogram
	// Sentences by outcome (spoken, failed, stopped).
	Sentences *prometheus.CounterVec
	// Turns by outcome (spoken, stopped, text, busy, stale, resumed).
	Turns *prometheus.CounterVec
	// ActiveTurns is the voice turns this process is speaking.
	ActiveTurns prometheus.Gauge
	// BackendRequests by engine and outcome (ok, retry, failed).
	BackendRequests *prometheus.CounterVec
	// Ahead counts the sentences synthesised ahead by how they ended: used,
	// cancelled (the preemptive answer was), expired, mismatch (the answer
	// began with another sentence), replaced (a newer speculation), failed,
	// refused (too many held).
	Ahead *prometheus.CounterVec
	// AheadSaved: the backend's time to first audio a turn did not wait
	// for because its first sentence was synthesised ahead.
	AheadSaved prometheus.Histogram
}

var (
	once sync.Once
	def  *Metrics
)

// Default returns the metrics registered on prometheus.DefaultRegisterer.
func Default() *Metrics {
	once.Do(func() {
		buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
		def = &Metrics{
			FirstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "tts", Name: "time_to_first_byte_seconds",
				Help: "Time from sending a synthesis request to its first audio bytes.", Buckets: buckets}, []string{"engine"}),
			Synthesis: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "tts", Name: "synthesis_duration_seconds",
				Help: "Time from sending a synthesis request to the sentence's last audio byte.", Buckets: buckets}, []string{"engine"}),
			SentenceToAudio: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "tts", Name: "sentence_to_audio_seconds",
				Help: "Time from an AssistantSentence stored in JetStream to its first SpeechAudio chunk published.", Buckets: buckets}),
			Sentences: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "tts", Name: "sentences_total",
				Help: "Sentences by outcome."}, []string{"outcome"}),
			Turns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "tts", Name: "turns_total",
				Help: "Answers taken by outcome."}, []string{"outcome"}),
			ActiveTurns: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "tts", Name: "active_turns",
				Help: "Voice turns being spoken by this process."}),
			BackendRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "tts", Name: "backend_requests_total",
				Help: "Synthesis requests by engine and outcome."}, []string{"engine", "outcome"}),
			Ahead: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "tts", Name: "ahead_total",
				Help: "First sentences of preemptive answers synthesised ahead, by outcome."}, []string{"outcome"}),
			AheadSaved: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "tts", Name: "ahead_saved_seconds",
				Help: "Backend time to first audio a turn did not wait for, its first sentence synthesised ahead.", Buckets: buckets}),
		}
		prometheus.DefaultRegisterer.MustRegister(def.FirstByte, def.Synthesis, def.SentenceToAudio, def.Sentences, def.Turns, def.ActiveTurns, def.BackendRequests,
			def.Ahead, def.AheadSaved)
	})
	return def
}

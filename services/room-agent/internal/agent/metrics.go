package agent

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the room-agent, on the default Prometheus registry.
type Metrics struct {
	// VoiceToVoice: end of user speech (end-pointer decision) → first agent audio frame written.
	VoiceToVoice prometheus.Histogram
	// SpeechEndToTranscript: end of user speech → final Transcription seen on the stream.
	SpeechEndToTranscript prometheus.Histogram
	// BargeInStop: barge-in decided → playout stopped.
	BargeInStop prometheus.Histogram
	// ASRJobs published, by kind (partial, final).
	ASRJobs *prometheus.CounterVec
	// Rooms the agent is in.
	Rooms prometheus.Gauge
	// BargeIns counted (playout paused).
	BargeIns prometheus.Counter
	// BargeInConfirm: playout paused → the interrupting speech had words (the answer stopped).
	BargeInConfirm prometheus.Histogram
	// FalseInterruptions: barge-ins whose speech had no words; playout resumed.
	FalseInterruptions prometheus.Counter
	// BackchannelHeld: a barge-in heard as a backchannel: how long the answer was lowered.
	BackchannelHeld prometheus.Histogram
	// EchoHeld: a barge-in whose words were the answer's own (its echo): how long it was lowered.
	EchoHeld prometheus.Histogram
	// VAD is 1 for the kind of VAD that listens (neural, energy).
	VAD *prometheus.GaugeVec
}

// VADKind records which VAD listens.
func (m *Metrics) VADKind(kind string) {
	m.VAD.Reset()
	m.VAD.WithLabelValues(kind).Set(1)
}

var (
	metricsOnce sync.Once
	metricsDef  *Metrics
)

// DefaultMetrics returns the metrics registered on prometheus.DefaultRegisterer.
func DefaultMetrics() *Metrics {
	metricsOnce.Do(func() {
		b := []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5}
		h := func(name, help string) prometheus.Histogram {
			return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "voice", Name: name, Help: help, Buckets: b})
		}
		metricsDef = &Metrics{
			VoiceToVoice:          h("voice_to_voice_seconds", "End of user speech (after the end-pointing silence) to the first agent audio frame."),
			SpeechEndToTranscript: h("speech_end_to_transcript_seconds", "End of user speech to the final transcription."),
			BargeInStop:           h("barge_in_stop_seconds", "Barge-in detected to agent audio stopped."),
			ASRJobs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "voice", Name: "asr_jobs_total",
				Help: "ASR jobs published by kind."}, []string{"kind"}),
			Rooms:          prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "voice", Name: "rooms", Help: "Rooms this agent is in."}),
			BargeIns:       prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "voice", Name: "barge_ins_total", Help: "Barge-ins."}),
			BargeInConfirm: h("barge_in_confirm_seconds", "Barge-in (playout paused) to the first words of the interrupting speech (answer stopped)."),
			FalseInterruptions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "voice", Name: "false_interruptions_total",
				Help: "Barge-ins whose speech had no words: playout resumed."}),
			BackchannelHeld: h("backchannel_held_seconds", "A barge-in whose words were only a backchannel (mm-hmm, yeah): how long the answer was lowered before it went on at its level."),
			EchoHeld:        h("echo_held_seconds", "A barge-in whose words were the answer's own, come back through the microphone (an echo the canceller missed): how long the answer was lowered before it went on at its level."),
			VAD: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "voice", Name: "vad_info",
				Help: "1 for the kind of VAD that listens: neural (Silero) or energy (the fallback)."}, []string{"kind"}),
		}
		prometheus.DefaultRegisterer.MustRegister(metricsDef.VoiceToVoice, metricsDef.SpeechEndToTranscript, metricsDef.BargeInStop,
			metricsDef.ASRJobs, metricsDef.Rooms, metricsDef.BargeIns, metricsDef.BargeInConfirm, metricsDef.FalseInterruptions, metricsDef.BackchannelHeld, metricsDef.EchoHeld, metricsDef.VAD)
		speculationOutcomes()
	})
	return metricsDef
}

package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// turnMetrics are what the tracker measures of a voice turn and its
// barge-ins: given to it, so it keeps no path to the room's Deps.
type turnMetrics struct {
	v2v, endToTranscript, bargeInStop, bargeInConfirm prometheus.Observer
	bargeIns, falseInterruptions                      prometheus.Counter
	// backchannelHeld: how long the answer was lowered for a backchannel.
	backchannelHeld prometheus.Observer
	// echoHeld: how long the answer was lowered for its own echo.
	echoHeld prometheus.Observer
	// onVoiceToVoice is Config.OnVoiceToVoice (nil: none).
	onVoiceToVoice func(time.Duration)
}

func newTurnMetrics(m *Metrics, onVoiceToVoice func(time.Duration)) turnMetrics {
	return turnMetrics{v2v: m.VoiceToVoice, endToTranscript: m.SpeechEndToTranscript, bargeInStop: m.BargeInStop,
		bargeInConfirm: m.BargeInConfirm, bargeIns: m.BargeIns, falseInterruptions: m.FalseInterruptions, backchannelHeld: m.BackchannelHeld, echoHeld: m.EchoHeld,
		onVoiceToVoice: onVoiceToVoice}
}

// voiceToVoice records the end of the user's speech to the answer's first frame.
func (m turnMetrics) voiceToVoice(d time.Duration) {
	m.v2v.Observe(d.Seconds())
	if m.onVoiceToVoice != nil {
		m.onVoiceToVoice(d)
	}
}

// speechEndToTranscript records the end of the user's speech to its final transcript.
func (m turnMetrics) speechEndToTranscript(d time.Duration) { m.endToTranscript.Observe(d.Seconds()) }

// bargedIn records a barge-in that paused playout, stopped within d of the decision.
func (m turnMetrics) bargedIn(d time.Duration) {
	m.bargeIns.Inc()
	m.bargeInStop.Observe(d.Seconds())
}

// confirmed records a barge-in whose speech had words, d after the pause.
func (m turnMetrics) confirmed(d time.Duration) { m.bargeInConfirm.Observe(d.Seconds()) }

// falseInterruption records a barge-in whose speech had no words.
func (m turnMetrics) falseInterruption() { m.falseInterruptions.Inc() }

// backchannel records a barge-in whose words were a backchannel: the
// answer went on after being lowered for d.
func (m turnMetrics) backchannel(d time.Duration) { m.backchannelHeld.Observe(d.Seconds()) }

// echo records a barge-in whose words were the answer's own: it went on
// after being lowered for d.
func (m turnMetrics) echo(d time.Duration) { m.echoHeld.Observe(d.Seconds()) }

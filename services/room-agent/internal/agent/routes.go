package agent

import (
	"context"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// routes is a room's core-NATS route table: the audio to play, and the
// speculative transcripts of its conversation (for the speculation waiting
// for them, and for a barge-in waiting for words).
func (r *Room) routes() *bus.Routes {
	rt := bus.NewRoutes("room-agent", r.log)
	bus.On(rt, "speech_audio", subjects.AudioOut(r.cid), r.onSpeechAudio)
	bus.On(rt, "spec_transcript", subjects.SpecTranscript(r.cid), r.onSpecTranscript)
	// Its own subscription, as before: a barge-in's stop is never behind a
	// speculation's end of turn.
	bus.On(rt, "spec_transcript_barge_in", subjects.SpecTranscript(r.cid), r.turns.onSpecTranscript)
	return rt
}

// onSpeechAudio queues a SpeechAudio chunk for playout.
func (r *Room) onSpeechAudio(_ context.Context, env protocol.Envelope, sa *protocol.SpeechAudio, _ bus.Inbound) error {
	if sa.Chunk == 0 { // once per sentence: the span that synthesised it, the parent of its voice.playout
		if sc, ok := telemetry.SpanContextFromMeta(env.Meta); ok {
			r.turns.sentenceAudio(sa.SentenceID, sc)
		}
	}
	r.player.Add(sa)
	return nil
}

package worker

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/wake"
)

// Hands-free mode. A job that carries wakeWords (the conversation's
// Configuration.wakeWord, set by the room-agent) is answered only when its
// transcript begins with one of them (pkg/wake). Nothing of an utterance
// that may not be addressed goes on a stream: its partial transcripts go to
// the room-agent on core NATS (alicia.spec.{cid}.transcript, like a
// speculative one); a final one not addressed goes there too, as
// Transcription{final, addressed: false}, and becomes no user message; an
// addressed one is published as usual (addressed: true), and its user
// message is the request without the wake word. A speculative transcript
// not addressed starts no preemptive answer.

// outNotAddressed: a hands-free final transcript that did not begin with a
// wake word (metrics label).
const outNotAddressed = "not_addressed"

// handsFree reports whether j is in hands-free mode, and marks tr with
// whether it is addressed; request is what the user message holds.
func handsFree(j *job, tr *protocol.Transcription) (on bool, request string) {
	if len(j.body.WakeWords) == 0 {
		return false, tr.Text
	}
	r := wake.New(j.body.WakeWords).Detect(tr.Text)
	tr.Addressed = protocol.Ptr(r.Addressed)
	return true, r.Request
}

// partialHandsFree sends a hands-free partial transcript to the room-agent
// only (its end of turn and barge-in read it).
func (w *Worker) partialHandsFree(ctx context.Context, j *job, tr *protocol.Transcription, outcome *string) error {
	if tr.Text == "" {
		*outcome = outEmpty
		return nil
	}
	env := protocol.New(j.cid, tr)
	env.Meta = copyMeta(j.env.Meta)
	if err := w.publishSpeculative(ctx, j, subjects.SpecTranscript(j.cid), env); err != nil {
		return fmt.Errorf("publish hands-free partial transcript: %w", err)
	}
	*outcome = outPublished
	return nil
}

// notAddressed tells the room-agent, on core NATS only, that the final
// transcript of a hands-free utterance was not addressed: it stores
// nothing of it and an answer it interrupted goes on.
func (w *Worker) notAddressed(ctx context.Context, j *job, tr *protocol.Transcription, log zerolog.Logger, outcome *string) error {
	env := protocol.New(j.cid, tr)
	env.Meta = copyMeta(j.env.Meta)
	if err := w.publishSpeculative(ctx, j, subjects.SpecTranscript(j.cid), env); err != nil {
		return fmt.Errorf("publish unaddressed transcript: %w", err)
	}
	*outcome = outNotAddressed
	log.Debug().Msg("hands-free: not addressed; nothing published on a stream")
	return nil
}

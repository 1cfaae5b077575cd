package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
)

// Speculative jobs. The room-agent sends one when its end-pointer sees a
// silence begin: the utterance so far, transcribed at once so that the
// transcript is ready when the silence ends the turn. Its transcript goes
// to the room-agent, and the UserMessage it would become to the llm, on
// core NATS only; the final job then carries that transcript and is not
// transcribed again.

// Reuse sources (metrics label).
const (
	reusedPartial       = "partial"
	reusedPartialFailed = "partial_failed"
	reusedSpeculative   = "speculative"
)

// errAbandoned: a partial's transcription ended without a result (its
// handler panicked).
var errAbandoned = errors.New("partial transcription abandoned")

// transcribing is one partial job's transcription in this replica.
type transcribing struct {
	audioMs int32
	done    chan struct{} // closed once res and err are set
	res     whisper.Result
	err     error
}

// inFlight are the partial jobs this replica is transcribing, by
// utterance: a speculative job whose speech one of them covers takes its
// transcript instead of sending the same audio to the backend again.
type inFlight struct {
	mu  sync.Mutex
	utt map[string][]*transcribing
}

func (f *inFlight) add(utterance string, audioMs int32) *transcribing {
	t := &transcribing{audioMs: audioMs, done: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.utt == nil {
		f.utt = map[string][]*transcribing{}
	}
	f.utt[utterance] = append(f.utt[utterance], t)
	return t
}

// finish publishes t's result to whoever waits for it and forgets t.
func (f *inFlight) finish(utterance string, t *transcribing, res whisper.Result, err error) {
	f.mu.Lock()
	ts := f.utt[utterance]
	for i, x := range ts {
		if x == t {
			ts = append(ts[:i], ts[i+1:]...)
			break
		}
	}
	if len(ts) == 0 {
		delete(f.utt, utterance)
	} else {
		f.utt[utterance] = ts
	}
	f.mu.Unlock()
	t.res, t.err = res, err
	close(t.done)
}

// covering returns the earliest-started partial of the utterance whose
// audio reaches voicedMs, or nil.
func (f *inFlight) covering(utterance string, voicedMs int32) *transcribing {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.utt[utterance] {
		if t.audioMs >= voicedMs {
			return t
		}
	}
	return nil
}

// transcribePartial transcribes a partial job, sharing its result with the
// speculative jobs that wait for it.
func (w *Worker) transcribePartial(ctx context.Context, j *job, span trace.Span) (res whisper.Result, err error) {
	t := w.partials.add(j.body.UtteranceID, j.body.DurationMs)
	err = errAbandoned
	defer func() { w.partials.finish(j.body.UtteranceID, t, res, err) }()
	return w.transcribe(ctx, j, span)
}

// transcribeSpeculative transcribes a speculative job, or takes the
// transcript of an in-flight partial of its utterance whose audio covers
// its speech. free is called once the job needs the backend no more.
func (w *Worker) transcribeSpeculative(ctx context.Context, j *job, span trace.Span, log zerolog.Logger, free func()) (whisper.Result, error) {
	voiced := j.body.DurationMs
	if v := j.body.VoicedMs; v != nil {
		voiced = *v
	}
	if t := w.partials.covering(j.body.UtteranceID, voiced); t != nil {
		// Waiting takes no backend slot. If the partial fails, this job
		// transcribes without one: the backend is then in trouble anyway.
		free()
		w.d.Metrics.ReuseWaiting.Inc()
		select {
		case <-t.done:
		case <-ctx.Done():
		}
		w.d.Metrics.ReuseWaiting.Dec()
		if err := ctx.Err(); err != nil {
			return whisper.Result{}, err
		}
		if t.err == nil {
			w.d.Metrics.Reused.WithLabelValues(reusedPartial).Inc()
			span.SetAttributes(attribute.String("alicia.asr.reused", reusedPartial), attribute.Int("alicia.asr.reused_audio_ms", int(t.audioMs)))
			return t.res, nil
		}
		w.d.Metrics.Reused.WithLabelValues(reusedPartialFailed).Inc()
		log.Debug().Err(t.err).Msg("the partial covering this speculative job failed; transcribing it")
	}
	defer free()
	return w.transcribe(ctx, j, span)
}

// speculate publishes a speculative job's transcript on core NATS — always,
// so the room-agent learns it even when nothing was said — and, when it has
// words and enough confidence, the UserMessage it would become, for the
// llm to start on (request: without the wake word in hands-free mode,
// where one not addressed starts nothing). Nothing goes to the
// conversation's stream. A failed publish is not retried: the final job is
// transcribed as usual then.
func (w *Worker) speculate(ctx context.Context, j *job, tr *protocol.Transcription, request string, outcome *string) error {
	env := protocol.New(j.cid, tr)
	env.Meta = copyMeta(j.env.Meta)
	if err := w.publishSpeculative(ctx, j, subjects.SpecTranscript(j.cid), env); err != nil {
		*outcome = outFailed
		return fmt.Errorf("%w: publish speculative transcript: %w", errDone, err)
	}
	switch {
	case tr.Text == "":
		*outcome = outEmpty
		return nil
	case tr.Confidence != nil && *tr.Confidence < w.s.MinConfidence:
		*outcome = outLowConfidence
		return nil
	case tr.Addressed != nil && !*tr.Addressed:
		*outcome = outNotAddressed
		return nil
	case request == "":
		*outcome = outWakeOnly
		return nil
	}
	if err := w.publishSpeculative(ctx, j, subjects.SpecPreempt(j.cid), userMessage(j, request)); err != nil {
		*outcome = outFailed
		return fmt.Errorf("%w: publish speculative user message: %w", errDone, err)
	}
	*outcome = outPublished
	return nil
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/asr/internal/whisper"
)

var tracer = otel.Tracer("github.com/alicia-voice/alicia/services/asr")

// Job outcomes (metrics label, span attribute, log field).
const (
	outPublished     = "published"      // a partial transcript went out; a speculative one with its user message
	outUserMessage   = "user_message"   // a final one became the user's message
	outStale         = "stale"          // a partial or speculative job overtaken by a later job
	outEmpty         = "empty"          // nothing was said
	outLowConfidence = "low_confidence" // a final below the confidence floor
	outBackchannel   = "backchannel"    // a final the room-agent heard as a backchannel over an answer
	outEcho          = "echo"           // a final the room-agent heard as the answer's own echo
	outDuplicate     = "duplicate"      // an earlier try of this job did it all
	outUnavailable   = "unavailable"
	outRejected      = "rejected"
	outRetry         = "retry"
	outCanceled      = "canceled"
	outFailed        = "failed"    // a speculative job's publish failed (not retried)
	outWakeOnly      = "wake_only" // hands-free: only the wake word was said
)

// process does one valid job; free is called when it needs the backend no more.
func (w *Worker) process(ctx context.Context, j *job, free func()) (err error) {
	start := time.Now()
	b := j.body
	kind := j.kind()
	if b.CreatedAt > 0 {
		w.d.Metrics.QueueWait.WithLabelValues(kind).Observe(max(0, start.Sub(time.UnixMilli(b.CreatedAt)).Seconds()))
	}
	ctx = telemetry.ExtractMeta(ctx, j.env.Meta)
	ctx, span := tracer.Start(ctx, "asr.job", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("alicia.conversation_id", j.cid), attribute.String("alicia.utterance_id", b.UtteranceID),
		attribute.String("alicia.asr.job_id", b.ID), attribute.Bool("alicia.asr.final", j.final()),
		attribute.Bool("alicia.asr.speculative", j.speculative()),
		attribute.Int("alicia.asr.sequence", int(b.Sequence)), attribute.Int("alicia.asr.audio_ms", int(b.DurationMs)),
		attribute.Int64("alicia.delivery", int64(j.delivered))))
	log := telemetry.ForConversation(w.d.Log, j.cid).With().Str("utterance_id", b.UtteranceID).Str("job_id", b.ID).
		Str("kind", kind).Int32("sequence", b.Sequence).Uint64("delivery", j.delivered).Logger()
	outcome := outRetry
	defer func() {
		switch {
		case err == nil || errors.Is(err, errDone):
		case ctx.Err() != nil:
			outcome = outCanceled
		default:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String("alicia.outcome", outcome))
		span.End()
		w.d.Metrics.Jobs.WithLabelValues(kind, outcome).Inc()
		ev := log.Debug()
		if j.final() {
			ev = log.Info()
		}
		ev.Str("outcome", outcome).Dur("took", time.Since(start)).Err(err).Msg("asr job")
	}()

	var res whisper.Result
	reused := false // a final job's earlier try published its transcription
	if !j.final() {
		if newer, err := w.newerJob(ctx, j); err != nil {
			log.Warn().Err(err).Msg("cannot tell whether a later job is queued")
		} else if newer {
			outcome = outStale
			return nil
		}
	} else if j.delivered > 1 {
		done, prev, err := w.earlierTry(ctx, j)
		if err != nil {
			log.Warn().Err(err).Msg("cannot read what an earlier try published")
		}
		if done {
			outcome = outDuplicate
			return nil
		}
		if prev != nil {
			res, reused = whisper.Result{Text: prev.Text, Confidence: prev.Confidence, Language: deref(prev.Language)}, true
		}
	}
	if !reused {
		switch {
		case j.final() && b.Transcript != nil:
			// The speculative job's transcript: the user said nothing more.
			free()
			res = whisper.Result{Text: *b.Transcript, Confidence: b.TranscriptConfidence}
			w.d.Metrics.Reused.WithLabelValues(reusedSpeculative).Inc()
			span.SetAttributes(attribute.String("alicia.asr.reused", reusedSpeculative))
		case j.speculative():
			res, err = w.transcribeSpeculative(ctx, j, span, log, free)
		case j.final():
			res, err = w.transcribe(ctx, j, span)
			free()
		default:
			res, err = w.transcribePartial(ctx, j, span)
			free()
		}
		if err != nil {
			return w.failed(ctx, j, err, &outcome)
		}
	}
	if res.Confidence != nil {
		span.SetAttributes(attribute.Float64("alicia.asr.confidence", *res.Confidence))
	}
	tr := &protocol.Transcription{ID: b.UtteranceID, ConversationID: j.cid, Final: j.final(), Text: res.Text, Confidence: res.Confidence}
	if lang := firstNonEmpty(res.Language, deref(b.Language), w.s.Language); lang != "" {
		tr.Language = &lang
	}
	handsFree, request := handsFree(j, tr)
	switch {
	case j.speculative():
		return w.speculate(ctx, j, tr, request, &outcome)
	case !j.final() && handsFree:
		return w.partialHandsFree(ctx, j, tr, &outcome)
	case !j.final():
		return w.partial(ctx, j, tr, &outcome)
	case handsFree && !*tr.Addressed:
		return w.notAddressed(ctx, j, tr, log, &outcome)
	}
	return w.final(ctx, j, tr, request, reused, span, log, &outcome)
}

func (w *Worker) partial(ctx context.Context, j *job, tr *protocol.Transcription, outcome *string) error {
	if tr.Text == "" {
		*outcome = outEmpty
		return nil
	}
	published, err := w.publishTranscription(ctx, j, tr, true)
	if err != nil {
		return fmt.Errorf("publish partial transcription: %w", err)
	}
	*outcome = outPublished
	if !published {
		*outcome = outStale
	}
	return nil
}

// final publishes the final Transcription (always: the client learns how
// the utterance ended), then — when something was said with enough
// confidence, and it was no backchannel over an answer nor its echo — the UserMessage
// the llm answers, holding request (the transcript, without the wake word
// in hands-free mode).
func (w *Worker) final(ctx context.Context, j *job, tr *protocol.Transcription, request string, reused bool, span trace.Span, log zerolog.Logger, outcome *string) error {
	if !reused {
		if _, err := w.publishTranscription(ctx, j, tr, false); err != nil {
			return fmt.Errorf("publish final transcription: %w", err)
		}
	}
	if end := deref(j.body.SpeechEndMs); end > 0 {
		d := max(0, time.Since(time.UnixMilli(end)))
		w.d.Metrics.SpeechEndToFinal.Observe(d.Seconds())
		span.SetAttributes(attribute.Int64("alicia.asr.speech_end_to_final_ms", d.Milliseconds()))
	}
	if tr.Confidence != nil {
		w.d.Metrics.Confidence.Observe(*tr.Confidence)
	}
	switch {
	case tr.Text == "":
		*outcome = outEmpty
		return nil
	case j.body.Backchannel != nil && *j.body.Backchannel:
		// Said over an answer, and only "mm-hmm", "yeah": the answer goes
		// on (the room-agent records the backchannel); nothing to answer.
		*outcome = outBackchannel
		log.Info().Str("text", tr.Text).Msg("backchannel over an answer: no user message")
		return nil
	case j.body.Echo != nil && *j.body.Echo:
		// The answer's own words, come back through the microphone: the
		// answer goes on (the room-agent records it); nothing to answer.
		*outcome = outEcho
		log.Info().Str("text", tr.Text).Msg("the answer's own echo: no user message")
		return nil
	case tr.Confidence != nil && *tr.Confidence < w.s.MinConfidence:
		*outcome = outLowConfidence
		log.Info().Float64("confidence", *tr.Confidence).Float64("floor", w.s.MinConfidence).Msg("final transcript below the confidence floor: no user message")
		return nil
	case request == "":
		*outcome = outWakeOnly
		return nil
	}
	if err := w.publishUserMessage(ctx, j, request); err != nil {
		return fmt.Errorf("publish user message: %w", err)
	}
	*outcome = outUserMessage
	return nil
}

// transcribe sends the job's audio to the backend as WAV.
func (w *Worker) transcribe(ctx context.Context, j *job, span trace.Span) (whisper.Result, error) {
	ctx, rspan := tracer.Start(ctx, "asr.transcribe", trace.WithSpanKind(trace.SpanKindClient))
	defer rspan.End()
	b := j.body
	req := whisper.Request{
		WAV:      audio.EncodeWAV(audio.Samples(b.Data), j.rate),
		Language: firstNonEmpty(deref(b.Language), w.s.Language),
		Prompt:   deref(b.Prompt),
		Attempts: 1, // the next partial is due soon
	}
	if j.final() {
		req.Attempts = w.s.Attempts
	}
	start := time.Now()
	res, err := w.d.ASR.Transcribe(ctx, req)
	took := time.Since(start)
	outcome := "ok"
	switch {
	case err == nil:
	case ctx.Err() != nil:
		outcome = outCanceled
	case errors.Is(err, whisper.ErrRejected):
		outcome = outRejected
	default:
		outcome = outUnavailable
	}
	w.d.Metrics.RequestDuration.WithLabelValues(j.kind(), outcome).Observe(took.Seconds())
	span.SetAttributes(attribute.Int64("alicia.asr.request_ms", took.Milliseconds()), attribute.Int("alicia.asr.attempts", res.Attempts))
	if err != nil {
		rspan.RecordError(err)
		rspan.SetStatus(codes.Error, err.Error())
	}
	return res, err
}

// failed settles a job the backend could not transcribe. A partial or a
// speculative job is dropped quietly (the next one, or the final, will
// tell); a final one reports ErrorMessage 503 (or 501 when the backend
// refused the audio) to the client and is terminated rather than retried
// in a loop.
func (w *Worker) failed(ctx context.Context, j *job, err error, outcome *string) error {
	if ctx.Err() != nil {
		*outcome = outCanceled
		return err
	}
	code, msg := protocol.CodeBackendUnavailable, "Speech recognition is unavailable right now. Please try again, or type your message."
	*outcome = outUnavailable
	if errors.Is(err, whisper.ErrRejected) {
		code, msg = protocol.CodeInternal, "Your speech could not be transcribed."
		*outcome = outRejected
	} else if !errors.Is(err, whisper.ErrUnavailable) {
		*outcome = outRetry
		return err
	}
	if j.final() {
		e := errorEnvelope(j.cid, j.body.UtteranceID, code, msg)
		e.Meta = copyMeta(j.env.Meta)
		if perr := w.publishError(ctx, e, errorMsgID(j)); perr != nil {
			*outcome = outRetry
			return fmt.Errorf("report %w: %w", err, perr)
		}
	}
	return fmt.Errorf("%w: %w", errDone, err)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

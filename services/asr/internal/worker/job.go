package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Job kinds (metrics label, log field).
const (
	kindPartial     = "partial"
	kindSpeculative = "speculative"
	kindFinal       = "final"
)

// job is one decoded ASR job and where it came from.
type job struct {
	env  protocol.Envelope
	body *protocol.ASRJob
	cid  string
	// seq is the job's ASR_JOBS sequence: the order the room-agent made the
	// conversation's jobs in, across utterances.
	seq       uint64
	delivered uint64
	rate      int // sample rate of body.Data
}

// kind: a job marked speculative is one whatever its final flag says, so
// nothing of it ever reaches the conversation's stream.
func (j *job) kind() string {
	switch {
	case j.speculative():
		return kindSpeculative
	case j.body.Final:
		return kindFinal
	}
	return kindPartial
}

func (j *job) speculative() bool { return deref(j.body.Speculative) }

// final: the job ends the user's turn (its transcript becomes the message).
func (j *job) final() bool { return j.body.Final && !j.speculative() }

// decode reads and checks a job; the error carries a protocol code. The
// returned job has cid set whenever the subject names a conversation.
func decode(subject string, data []byte, d bus.Delivery) (*job, error) {
	j := &job{seq: d.Sequence, delivered: max(d.NumDelivered, 1)}
	if cid, ok := strings.CutPrefix(subject, subjects.ASRJob("")); ok && subjects.Validate(cid) == nil {
		j.cid = cid
	}
	env, err := protocol.Decode(data)
	if err != nil {
		return j, err
	}
	j.env = env
	body, ok := env.Body.(*protocol.ASRJob)
	if !ok {
		return j, &protocol.Error{Code: protocol.CodeUnknownType, Reason: fmt.Sprintf("%s on the ASR queue, want %s", env.Type, protocol.TypeASRJob)}
	}
	j.body = body
	invalid := func(format string, args ...any) error {
		return &protocol.Error{Code: protocol.CodeInvalidBody, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case j.cid == "":
		return j, invalid("subject %q names no conversation", subject)
	case body.ConversationID != j.cid || env.ConversationID != j.cid:
		return j, invalid("job of conversation %q (envelope %q) on the queue of %q", body.ConversationID, env.ConversationID, j.cid)
	case body.ID == "" || body.UtteranceID == "":
		return j, invalid("job without id or utteranceId")
	case len(body.Data) < 2:
		return j, invalid("job %s carries no audio", body.ID)
	}
	if j.rate, err = audio.ParsePCMFormat(body.Format); err != nil {
		return j, invalid("format: %v", err)
	}
	return j, nil
}

// work decodes and does one job. nil acks it; an error wrapping errDone
// terminates it; a permanent one dead-letters it; another error gives it
// back for a retry.
func (w *Worker) work(ctx context.Context, data []byte, d bus.Delivery, free func()) error {
	j, err := decode(d.Subject, data, d)
	if err != nil {
		free()
		return w.reject(ctx, data, d, j, err)
	}
	w.applyLanguage(ctx, j)
	return w.process(ctx, j, free)
}

// reject reports a malformed job to the conversation (when the subject
// names one) and dead-letters it.
func (w *Worker) reject(ctx context.Context, data []byte, d bus.Delivery, j *job, cause error) error {
	w.d.Metrics.Jobs.WithLabelValues("unknown", "malformed").Inc()
	if j.cid != "" {
		code := protocol.Code(cause)
		if code == 0 {
			code = protocol.CodeInvalidBody
		}
		var origin string
		if j.body != nil {
			origin = j.body.UtteranceID
		}
		e := errorEnvelope(j.cid, origin, code, "Your speech could not be processed (the voice agent sent a malformed job).")
		e.Meta = copyMeta(j.env.Meta)
		msgID := fmt.Sprintf("%s:asr:bad:%d", j.cid, d.Sequence)
		if err := w.publishError(ctx, e, msgID); err != nil {
			return err // retried: the client must hear of it
		}
	}
	return bus.Permanent(cause) // dead-lettered by the settler
}

// giveUp tells the client of a final job given up (its tries exhausted, or
// its handler crashed; the settler dead-letters it) that its speech was lost.
func (w *Worker) giveUp(ctx context.Context, data []byte, d bus.Delivery) {
	j, err := decode(d.Subject, data, d)
	if err == nil && j.final() {
		e := errorEnvelope(j.cid, j.body.UtteranceID, protocol.CodeInternal, "Your speech could not be transcribed because of an internal error.")
		e.Meta = copyMeta(j.env.Meta)
		if perr := w.publishError(ctx, e, errorMsgID(j)); perr != nil {
			w.d.Log.Error().Err(perr).Msg("cannot report a lost utterance")
		}
	}
	if err == nil {
		w.d.Metrics.Jobs.WithLabelValues(j.kind(), "given_up").Inc()
	}
}

// errDone marks a job settled without success: it is terminated, not retried.
var errDone = errors.New("job settled")

package worker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// HeaderJobSequence on a Transcription is the ASR_JOBS sequence of the job
// it came from: the order of transcriptions a partial must not overtake.
const HeaderJobSequence = "Alicia-Asr-Job-Sequence"

// HeaderJob on a speculative transcript or user message is the id of the
// speculative job it came from.
const HeaderJob = "Alicia-Asr-Job"

// orderAttempts bounds how often a partial retries its ordered publish when
// other transcriptions of the conversation keep landing first.
const orderAttempts = 64

// Message ids: a redelivered job publishes nothing twice.
func transcriptionMsgID(j *job) string { return j.body.ID + ":tr" }
func userMessageMsgID(j *job) string   { return j.cid + ":asr:" + j.body.UtteranceID }
func errorMsgID(j *job) string         { return j.cid + ":asr:" + j.body.UtteranceID + ":err" }

// publishTranscription publishes tr with the job's sequence in a header.
// ordered (partials): only when no transcription of a later job of the
// conversation is out, checked and published in one step — the publish
// expects the last transcription it read (JetStream's expected last subject
// sequence), so of two replicas finishing out of order only the later job's
// partial lands. published is false for a partial found stale.
func (w *Worker) publishTranscription(ctx context.Context, j *job, tr *protocol.Transcription, ordered bool) (published bool, err error) {
	env := protocol.New(j.cid, tr)
	env.Meta = copyMeta(j.env.Meta)
	msg := nats.NewMsg(subjects.Server(j.cid, protocol.TypeTranscription))
	if msg.Data, err = encode(ctx, env); err != nil {
		return false, err
	}
	msg.Header.Set(HeaderJobSequence, strconv.FormatUint(j.seq, 10))
	for range orderAttempts {
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(transcriptionMsgID(j))}
		if ordered {
			last, lastJob, err := w.lastTranscription(ctx, j.cid)
			if err != nil {
				return false, err
			}
			if lastJob > j.seq {
				return false, nil
			}
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last))
		}
		pctx, cancel := context.WithTimeout(ctx, w.s.PublishTimeout)
		_, err = w.d.JS.PublishMsg(pctx, msg, opts...)
		cancel()
		if ordered && wrongLastSequence(err) {
			continue // another transcription landed in between: look again
		}
		return err == nil, err
	}
	return false, fmt.Errorf("transcription of job %s: %d ordered publishes lost to others", j.body.ID, orderAttempts)
}

// publishUserMessage makes the final transcript the user's message, once
// per utterance whatever the deliveries.
func (w *Worker) publishUserMessage(ctx context.Context, j *job, text string) error {
	data, err := encode(ctx, userMessage(j, text))
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, w.s.PublishTimeout)
	defer cancel()
	_, err = w.d.JS.Publish(pctx, subjects.Client(j.cid, protocol.TypeUserMessage), data, jetstream.WithMsgID(userMessageMsgID(j)))
	return err
}

// userMessage is the UserMessage a job's transcript becomes: published on
// the stream for a final job, and — the same envelope — on core NATS for a
// speculative one, so the answer the llm starts on it is the one it would
// give the final.
func userMessage(j *job, text string) protocol.Envelope {
	ts := j.body.CreatedAt
	if end := deref(j.body.SpeechEndMs); end > 0 {
		ts = end
	}
	if ts <= 0 {
		ts = time.Now().UnixMilli()
	}
	env := protocol.New(j.cid, &protocol.UserMessage{ID: j.body.UtteranceID, ConversationID: j.cid, Content: text, Timestamp: &ts})
	env.Meta = copyMeta(j.env.Meta)
	return env
}

// publishSpeculative publishes env on core NATS (never on a stream: a
// speculation leaves no trace in the conversation), naming the job.
func (w *Worker) publishSpeculative(ctx context.Context, j *job, subject string, env protocol.Envelope) error {
	msg := nats.NewMsg(subject)
	var err error
	if msg.Data, err = encode(ctx, env); err != nil {
		return err
	}
	msg.Header.Set(HeaderJob, j.body.ID)
	return w.d.JS.Conn().PublishMsg(msg)
}

func (w *Worker) publishError(ctx context.Context, env protocol.Envelope, msgID string) error {
	pctx, cancel := context.WithTimeout(ctx, w.s.PublishTimeout)
	defer cancel()
	_, err := w.d.Publisher.PublishServer(pctx, env, msgID)
	return err
}

// newerJob reports whether a later job of the conversation is queued: a
// partial overtaken by it (the next partial, the final, or the next
// utterance) is not worth a transcription.
func (w *Worker) newerJob(ctx context.Context, j *job) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, w.s.PublishTimeout)
	defer cancel()
	m, err := w.d.Jobs.GetLastMsgForSubject(ctx, subjects.ASRJob(j.cid))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.Sequence > j.seq, nil
}

// lastTranscription returns the CONVERSATIONS sequence of the
// conversation's last Transcription (0: none) and the job it came from
// (0: unknown).
func (w *Worker) lastTranscription(ctx context.Context, cid string) (seq, jobSeq uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.s.PublishTimeout)
	defer cancel()
	m, err := w.d.Conversations.GetLastMsgForSubject(ctx, subjects.Server(cid, protocol.TypeTranscription))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	jobSeq, _ = strconv.ParseUint(m.Header.Get(HeaderJobSequence), 10, 64)
	return m.Sequence, jobSeq, nil
}

// earlierTry reads what an earlier delivery of a final job published before
// it died: done when its user message is out; prev when only its final
// transcription is (the user message is then made from it, not from a
// second transcription that might read differently).
func (w *Worker) earlierTry(ctx context.Context, j *job) (done bool, prev *protocol.Transcription, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.s.PublishTimeout)
	defer cancel()
	um, err := w.d.Conversations.GetLastMsgForSubject(ctx, subjects.Client(j.cid, protocol.TypeUserMessage))
	switch {
	case err == nil && um.Header.Get(jetstream.MsgIDHeader) == userMessageMsgID(j):
		return true, nil, nil
	case err != nil && !errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil, err
	}
	tm, err := w.d.Conversations.GetLastMsgForSubject(ctx, subjects.Server(j.cid, protocol.TypeTranscription))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil, nil
	}
	if err != nil || tm.Header.Get(jetstream.MsgIDHeader) != transcriptionMsgID(j) {
		return false, nil, err
	}
	env, err := protocol.Decode(tm.Data)
	if err != nil {
		return false, nil, err
	}
	tr, ok := env.Body.(*protocol.Transcription)
	if !ok {
		return false, nil, nil
	}
	if tr.Text == "" || (tr.Confidence != nil && *tr.Confidence < w.s.MinConfidence) {
		return true, nil, nil // no user message was due
	}
	return false, tr, nil
}

// wrongLastSequence: an expected-last-sequence publish found another message there.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// encode is how bus.Publisher encodes: the caller's span goes into meta.
func encode(ctx context.Context, env protocol.Envelope) ([]byte, error) {
	env.Meta = telemetry.InjectMeta(ctx, env.Meta)
	return protocol.Encode(env)
}

// copyMeta carries the job's meta (trace context, alicia.user_id) onto what
// it produces.
func copyMeta(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func errorEnvelope(cid, origin string, code int32, msg string) protocol.Envelope {
	e := &protocol.ErrorMessage{ID: deriveID("aerr", cid, origin, code), ConversationID: cid, Code: code,
		Message: msg, Severity: 2, Recoverable: true}
	if origin != "" {
		e.OriginatingID = &origin
	}
	return protocol.New(cid, e)
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// deriveID makes a stable id from parts, so every try of a job names what
// it publishes the same way.
func deriveID(prefix string, parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprint(h, p)
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	out := append(make([]byte, 0, len(prefix)+21), prefix...)
	out = append(out, '_')
	for _, v := range []uint64{binary.BigEndian.Uint64(sum), binary.BigEndian.Uint64(sum[8:])} {
		for range 10 {
			out = append(out, idAlphabet[v%62])
			v /= 62
		}
	}
	return string(out)
}

package speech

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/tts/internal/synth"
)

// speak synthesises one sentence and publishes its audio, then its
// SentenceAudio. A failed synthesis is retried once when no audio went out
// yet; then the sentence is closed (its last chunk, maybe empty, tells the
// room-agent not to wait for more), the client gets ErrorMessage 503, and
// the turn goes on with the next sentence.
func (t *turn) speak(s sentence) {
	sp, m := t.sp, t.sp.d.Metrics
	engine := sp.d.Synth.Engine()
	ctx, span := tracer.Start(telemetry.ExtractMeta(t.ctx, s.env.Meta), "tts.sentence", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("alicia.conversation_id", t.cid),
			attribute.String("alicia.message_id", t.id),
			attribute.String("alicia.sentence_id", s.id),
			attribute.Int("alicia.sentence.sequence", int(s.body.Sequence)),
			attribute.String("alicia.tts.engine", engine),
		))
	defer span.End()
	synthStart := time.Now()
	out := t.newChunks(ctx, s, synthStart)
	req := sp.synthesisFor(ctx, t.cid, s.body.Text)
	var ahead *aheadEntry
	if s.body.Sequence == 1 && sp.ahead != nil {
		ahead = sp.ahead.take(req)
	}
	if strings.TrimSpace(s.body.Text) == "" {
		// Nothing to say (the llm ends an answer whose text is all out with
		// an empty final sentence): an empty last chunk closes it.
		_ = out.finish()
		return
	}
	var err error
	fromBackend := true
	if ahead != nil {
		span.SetAttributes(attribute.Bool("alicia.tts.ahead", true))
		out.gotFirst = true // the backend's first byte was timed ahead
		err = ahead.replay(ctx, out.write)
		if err == nil || t.ctx.Err() != nil || out.sent > 0 {
			fromBackend = false
		} else {
			// The synthesis ahead failed before any audio went out: the
			// sentence is synthesised as if it had not been.
			t.log.Warn().Err(err).Str("sentence_id", s.id).Msg("synthesis ahead failed; synthesising again")
			out = t.newChunks(ctx, s, synthStart)
		}
	}
	for attempt := range 2 {
		if !fromBackend {
			break
		}
		if attempt > 0 {
			m.BackendRequests.WithLabelValues(engine, "retry").Inc()
			if sleep(t.ctx, sp.s.RetryDelay) != nil {
				break
			}
			out = t.newChunks(ctx, s, synthStart)
		}
		sctx, cancel := context.WithTimeout(ctx, sp.s.Timeout)
		out.requested = time.Now()
		err = sp.synthesize(sctx, req, out.write)
		cancel()
		if err == nil || t.ctx.Err() != nil || out.sent > 0 || errors.Is(err, synth.ErrRejected) {
			break
		}
		t.log.Warn().Err(err).Str("sentence_id", s.id).Msg("synthesis failed; retrying once")
	}
	if t.ctx.Err() != nil {
		m.Sentences.WithLabelValues("stopped").Inc()
		span.SetAttributes(attribute.Bool("alicia.tts.stopped", true))
		return
	}
	if err != nil {
		if fromBackend { // a failure ahead was counted there
			m.BackendRequests.WithLabelValues(engine, "failed").Inc()
		}
		m.Sentences.WithLabelValues("failed").Inc()
		span.RecordError(err)
		span.SetStatus(codes.Error, "synthesis failed")
		t.log.Error().Err(err).Str("sentence_id", s.id).Msg("synthesis failed")
		_ = out.finish()
		t.reportFailure(ctx, s)
		return
	}
	if fromBackend {
		m.BackendRequests.WithLabelValues(engine, "ok").Inc()
		m.Synthesis.WithLabelValues(engine).Observe(time.Since(out.requested).Seconds())
	}
	if out.finish() != nil {
		return // halted
	}
	m.Sentences.WithLabelValues("spoken").Inc()
	span.SetAttributes(attribute.Int("alicia.tts.bytes", out.sent), attribute.Int("alicia.tts.chunks", int(out.next)))
	t.store(ctx, s, out)
}

// synthesis is one backend request: what decides a sentence's audio. A
// turn's sentence and the same sentence synthesised ahead both get theirs
// from synthesisFor, so audio made ahead is the audio the turn would have
// made; an entry ahead is used only for an equal request. The backend's
// model and format are the replica's (Config); the voice, speed and
// language are the conversation's as they are when the sentence is
// synthesised (pkg/prefs), so a change applies from the next sentence.
type synthesis struct {
	cid    string
	engine string
	text   string
	voice  synth.Voice // zero: the installation's
}

func (sp *Speaker) synthesisFor(ctx context.Context, cid, text string) synthesis {
	return synthesis{cid: cid, engine: sp.d.Synth.Engine(), text: text, voice: sp.voiceOf(ctx, cid)}
}

// prefsTimeout bounds reading a conversation's preferences (a cache miss).
const prefsTimeout = 2 * time.Second

// voiceOf is how conversation cid is spoken now: what the conversation or
// its owner chose, the rest left to the backend's configuration.
func (sp *Speaker) voiceOf(ctx context.Context, cid string) synth.Voice {
	if sp.d.Prefs == nil {
		return synth.Voice{}
	}
	ctx, cancel := context.WithTimeout(ctx, prefsTimeout)
	defer cancel()
	eff, err := sp.d.Prefs.Get(ctx, cid)
	if err != nil {
		sp.d.Log.Warn().Err(err).Str("conversation_id", cid).Msg("preferences not read; speaking with what is known")
	}
	var v synth.Voice
	if eff.VoiceFrom != prefs.FromInstallation {
		v.Name = eff.Voice
	}
	if eff.SpeechSpeed != 1 {
		v.Speed = eff.SpeechSpeed
	}
	if eff.LanguageFrom != prefs.FromInstallation {
		v.Language = eff.Language
	}
	return v
}

// synthesize makes req's audio. A voice or speed the backend refuses (a
// voice it does not have) never fails the sentence: it is spoken with the
// installation's voice, and the refusal is logged.
func (sp *Speaker) synthesize(ctx context.Context, req synthesis, emit synth.Emit) error {
	err := sp.d.Synth.Synthesize(ctx, req.text, req.voice, emit)
	if errors.Is(err, synth.ErrRejected) && req.voice != (synth.Voice{}) && ctx.Err() == nil {
		sp.d.Log.Warn().Err(err).Str("conversation_id", req.cid).Str("voice", req.voice.Name).Float64("speed", req.voice.Speed).
			Str("language", req.voice.Language).Msg("the conversation's voice was refused; speaking with the installation's")
		return sp.d.Synth.Synthesize(ctx, req.text, synth.Voice{}, emit)
	}
	return err
}

// store publishes the sentence's SentenceAudio for persistence. Its audio
// is out: a stop arriving now does not unmake it.
func (t *turn) store(ctx context.Context, s sentence, out *chunks) {
	sp := t.sp
	a := &protocol.SentenceAudio{
		ConversationID: t.cid, MessageID: t.id, SentenceID: s.id, Sequence: s.body.Sequence, Format: sp.format,
		DurationMs: int32(audio.FramesDuration(out.sent/2, synth.Rate).Milliseconds()),
		ByteSize:   int32(out.sent), Engine: protocol.Ptr(sp.d.Synth.Engine()),
	}
	if sp.s.StoreAudio {
		if len(out.all) <= protocol.MaxEnvelopeSize-(16<<10) {
			a.Data = out.all
		} else {
			t.log.Warn().Str("sentence_id", s.id).Int("bytes", len(out.all)).Msg("sentence audio too large to store; stored without its bytes")
		}
	}
	env := protocol.New(t.cid, a)
	env.Meta = s.env.Meta
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sp.s.PublishTimeout)
	defer cancel()
	if _, err := sp.d.Publisher.PublishAgent(pctx, env, s.id+":audio"); err != nil {
		t.log.Error().Err(err).Str("sentence_id", s.id).Msg("publishing SentenceAudio failed")
	}
}

// reportFailure tells the client the sentence could not be spoken. It names
// the sentence, not the answer: the text answer itself is fine.
func (t *turn) reportFailure(ctx context.Context, s sentence) {
	e := &protocol.ErrorMessage{
		ID: protocol.DeriveID("aerr", t.cid, s.id, "tts"), ConversationID: t.cid, Code: protocol.CodeBackendUnavailable,
		Message:  "Speech synthesis is unavailable: this sentence could not be spoken.",
		Severity: 2, Recoverable: true, OriginatingID: protocol.Ptr(s.id),
	}
	env := protocol.New(t.cid, e)
	env.Meta = s.env.Meta
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.sp.s.PublishTimeout)
	defer cancel()
	if _, err := t.sp.d.Publisher.PublishServer(pctx, env, s.id+":tts-err"); err != nil {
		t.log.Error().Err(err).Str("sentence_id", s.id).Msg("publishing ErrorMessage failed")
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

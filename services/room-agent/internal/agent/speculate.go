package agent

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Speculative transcription. When the end-pointer sees a silence begin
// inside an utterance (vad.Pause), the listener sends the utterance so far
// as a speculative ASR job. The asr sends its transcript back on core NATS
// (SpecTranscript) and, as the UserMessage it would become, to the llm,
// which starts the answer and holds it. If the silence ends the turn, the
// final job carries that transcript, so nothing is transcribed after the
// silence and the held answer is released at once; if the user speaks
// again (vad.Resume), the speculation is dropped and a TurnEvent
// preempt_cancelled tells the llm and the tts to throw away what they
// started, and replay to show it.
//
// A speculation's trace starts at the pause (voice.speculation, a root):
// the speculative job, its transcript, the llm's preemptive turn and the
// tts's sentences hang under it through the envelopes' meta. When the
// silence ends the turn on it, the turn's voice.end_of_speech is its child,
// so an answer started speculatively is in the same trace as the end of
// speech, the final job and the playout; when the user speaks again, the
// span ends as cancelled and the TurnEvent is stored under it.

// HeaderASRJob names the ASR job a speculative transcript answers (set by
// the asr on SpecTranscript and SpecPreempt messages).
const HeaderASRJob = "Alicia-Asr-Job"

// specWait bounds how long a final job waits for its speculative
// transcript before it goes without one (and is transcribed as usual).
const specWait = 3 * time.Second

// speculation is one speculative job of the open utterance.
type speculation struct {
	jobID string
	utt   string
	at    time.Time

	// span is the speculation's voice.speculation span (a root), ended
	// when the speculation is settled (end).
	span    trace.Span
	endOnce sync.Once

	once sync.Once
	done chan struct{} // closed when the transcript came
	text string
	conf *float64
	// notAddressed: hands-free, and the transcript does not begin with a
	// wake word: the llm started nothing on it.
	notAddressed bool
}

func (s *speculation) resolve(text string, conf *float64, notAddressed bool) {
	s.once.Do(func() {
		s.text, s.conf, s.notAddressed = text, conf, notAddressed
		close(s.done)
	})
}

// end ends the speculation's span with what became of it (an outcome of
// speculationOutcomes) at t.
func (s *speculation) end(outcome string, t time.Time) {
	s.endOnce.Do(func() {
		if s.span == nil {
			return
		}
		s.span.SetAttributes(attribute.String("alicia.speculation.outcome", outcome))
		s.span.End(trace.WithTimestamp(t))
	})
}

// context is the speculation's span context (invalid without one).
func (s *speculation) context() trace.SpanContext {
	if s == nil || s.span == nil {
		return trace.SpanContext{}
	}
	return s.span.SpanContext()
}

// heard reports the transcript, if it came.
func (s *speculation) heard() (string, bool) {
	select {
	case <-s.done:
		return s.text, true
	default:
		return "", false
	}
}

var (
	specMetricsOnce sync.Once
	specOutcomes    *prometheus.CounterVec
)

// speculationOutcomes counts speculative jobs by what became of them:
// confirmed (the turn ended on it), cancelled (the user spoke again),
// late (the turn ended before its transcript came, within specWait or not).
func speculationOutcomes() *prometheus.CounterVec {
	specMetricsOnce.Do(func() {
		specOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "voice", Name: "speculations_total",
			Help: "Speculative transcriptions by outcome: confirmed, cancelled (the user spoke again), late (the transcript came after the silence ended the turn), missing (it never came)."}, []string{"outcome"})
		prometheus.DefaultRegisterer.MustRegister(specOutcomes)
	})
	return specOutcomes
}

// speculate sends the utterance so far (pcm, speech up to voiced bytes) as
// a speculative job. Called under l.mu.
func (l *listener) speculate(pcm []byte, voiced int, now time.Time) {
	if l.r.cfg.NoSpeculation || l.utt == "" {
		return
	}
	l.speculateAll(pcm, voiced, now)
}

// speculateAll sends pcm as a speculative job of the open utterance
// (l.spec), whatever the settings. Called under l.mu.
func (l *listener) speculateAll(pcm []byte, voiced int, now time.Time) {
	l.seq++
	cid := l.r.cid
	data := append([]byte(nil), pcm...)
	j := &protocol.ASRJob{ID: protocol.NewID("aj"), UtteranceID: l.utt, ConversationID: cid, Sequence: l.seq,
		Speculative: protocol.Ptr(true), Format: audio.PCMFormat(asrRate), Data: data,
		DurationMs: int32(audio.FramesDuration(len(data)/2, asrRate) / time.Millisecond),
		VoicedMs:   protocol.Ptr(int32(audio.FramesDuration(voiced/2, asrRate) / time.Millisecond)),
		TrackSid:   &l.trackSID, CreatedAt: now.UnixMilli(), WakeWords: l.wakeWords()}
	if l.r.cfg.Language != "" {
		j.Language = &l.r.cfg.Language
	}
	env := protocol.New(cid, j)
	// The speculation's trace starts here (see above).
	_, span := tracer.Start(l.r.ctx, "voice.speculation", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(now), trace.WithAttributes(attribute.String("alicia.conversation_id", cid),
			attribute.String("alicia.utterance_id", j.UtteranceID), attribute.String("alicia.asr_job_id", j.ID),
			attribute.Int("alicia.speech_ms", int(j.DurationMs)), attribute.Int("alicia.voiced_ms", int(*j.VoicedMs))))
	env.Meta = telemetry.InjectMeta(trace.ContextWithSpan(context.Background(), span), map[string]any{edge.MetaUserID: l.r.userOr(l.identity)})
	b, err := protocol.Encode(env)
	if err != nil {
		span.End()
		l.r.log.Error().Err(err).Msg("encode speculative ASR job")
		return
	}
	s := &speculation{jobID: j.ID, utt: l.utt, at: now, span: span, done: make(chan struct{})}
	l.spec = s
	l.r.specs.add(s)
	l.r.d.Metrics.ASRJobs.WithLabelValues("speculative").Inc()
	// Best effort, like partials: without it the final job is transcribed.
	if _, err := l.r.d.JS.PublishAsync(subjects.ASRJob(cid), b); err != nil {
		span.RecordError(err)
		l.r.log.Warn().Err(err).Msg("publish speculative ASR job")
	}
}

// unspeculate drops the open speculation: the user spoke again. If the
// llm may have started an answer on it (its transcript had words, or has
// not come yet), a TurnEvent preempt_cancelled tells the llm and the tts
// to drop it and records it in the stream. Called under l.mu.
func (l *listener) unspeculate(now time.Time) {
	s := l.spec
	if s == nil {
		return
	}
	l.spec = nil
	l.r.specs.remove(s)
	speculationOutcomes().WithLabelValues("cancelled").Inc()
	defer s.end("cancelled", now)
	text, ok := l.specText(s)
	if ok && text == "" {
		return // nothing was said: the asr started nothing
	}
	l.r.cancelPreempt(s, "speech_resumed", now)
}

// cancelPreempt publishes a TurnEvent preempt_cancelled for the answer the
// llm may have started on speculation s (reason: speech_resumed, or
// backchannel when the utterance was heard as one over an answer).
func (r *Room) cancelPreempt(s *speculation, reason string, now time.Time) {
	if _, ok := s.heard(); ok && s.notAddressed {
		return // hands-free speech not addressed: no answer was started, and nothing of it is stored
	}
	ev := &protocol.TurnEvent{ConversationID: r.cid, Kind: protocol.TurnEventKindPreemptCancelled, UtteranceID: &s.utt,
		Reason: protocol.Ptr(reason), HeldMs: protocol.Ptr(int32(now.Sub(s.at) / time.Millisecond)), Timestamp: now.UnixMilli()}
	if text, ok := s.heard(); ok {
		ev.Transcript = &text
	}
	env := protocol.New(r.cid, ev)
	// Stored under the speculation it cancels, in the preemptive answer's trace.
	env.Meta = telemetry.InjectMeta(trace.ContextWithSpan(context.Background(), s.span), nil)
	msgID := r.cid + ":te:" + s.jobID
	go func() {
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		defer cancel()
		if _, err := r.pub.PublishAgent(ctx, env, msgID); err != nil {
			r.log.Warn().Err(err).Str("utterance_id", s.utt).Msg("publish preempt cancellation")
		}
	}()
}

func (l *listener) specText(s *speculation) (string, bool) { return s.heard() }

// confirm returns the open speculation for the final job and forgets it.
// Called under l.mu.
func (l *listener) confirm() *speculation {
	s := l.spec
	l.spec = nil
	return s
}

// overAnswerSpecWait bounds the wait for the transcript of an utterance
// said over an answer: its words decide whether it is the answer's echo
// or a backchannel (no user message) or words to answer, so it waits
// longer than specWait for a slow asr.
const overAnswerSpecWait = 15 * time.Second

// finalTranscript waits (outside the listener's lock) up to wait for the
// speculative transcript the final job carries; false: send the job
// without one.
func (r *Room) finalTranscript(s *speculation, wait time.Duration) (string, *float64, bool) {
	defer r.specs.remove(s)
	if text, ok := s.heard(); ok {
		speculationOutcomes().WithLabelValues("confirmed").Inc()
		s.end("confirmed", time.Now())
		return text, s.conf, true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.done:
		speculationOutcomes().WithLabelValues("late").Inc()
		s.end("late", time.Now())
		return s.text, s.conf, true
	case <-t.C:
	case <-r.ctx.Done():
	}
	speculationOutcomes().WithLabelValues("missing").Inc()
	s.end("missing", time.Now())
	return "", nil, false
}

// specs are a room's speculations waiting for their transcript, by job id.
type specs struct {
	mu   sync.Mutex
	byID map[string]*speculation
}

func (s *specs) add(sp *speculation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]*speculation{}
	}
	s.byID[sp.jobID] = sp
}

func (s *specs) remove(sp *speculation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sp.jobID)
}

func (s *specs) get(id string) *speculation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// onSpecTranscript takes a speculative transcript from the asr, and in
// hands-free mode its partial transcripts and an unaddressed final one
// (handsfree.go).
func (r *Room) onSpecTranscript(_ context.Context, _ protocol.Envelope, tr *protocol.Transcription, in bus.Inbound) error {
	if tr.Final {
		if isNotAddressed(tr) {
			r.notAddressed(tr)
		}
		return nil
	}
	sp := r.specs.get(in.Header.Get(HeaderASRJob))
	if sp == nil && tr.Addressed != nil {
		// A hands-free partial: it adapts the end of turn as one on the
		// stream would.
		r.endOfTurn(tr, in.Header.Get(HeaderASRJob), false)
		return nil
	}
	if sp == nil || tr.ID != sp.utt {
		return nil // dropped or already settled
	}
	sp.resolve(tr.Text, tr.Confidence, isNotAddressed(tr))
	r.endOfTurn(tr, sp.jobID, true)
	return nil
}

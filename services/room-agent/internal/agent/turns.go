package agent

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

type sentence struct {
	id       string
	seq      int32
	final    bool
	recorded bool // a SentencePlayout was published
}

type turn struct {
	id        string
	userMsg   string
	sentences map[int32]*sentence
	stopped   bool
	voiced    bool // audio of it was played
	// trace is a span of the turn's trace: the user's voice.end_of_speech
	// when the turn answers speech, else the span that made its first
	// sentence's audio (tts.sentence). A sentence never played hangs under it.
	trace trace.SpanContext
	// played is the voice.playout span of its latest sentence played: a
	// barge-in between sentences hangs under it (the answer's trace, which is
	// the end of speech's unless the answer was speculative).
	played trace.SpanContext
}

// speechEnd is when an utterance ended, and its voice.end_of_speech span.
type speechEnd struct {
	at   time.Time
	span trace.SpanContext
}

// playout is the voice.playout span of the sentence being played: one per
// sentence, from its first frame to its last (or to the cut), parented on
// the span that synthesised its audio. A sentence paused by a barge-in and
// played again from its start keeps its span.
type playout struct {
	span     trace.Span
	turn     string
	sentence string
}

// tracker follows the conversation's answers on the stream, times the
// voice turn, and records what was played.
type tracker struct {
	r *Room

	mu            sync.Mutex
	turns         map[string]*turn
	order         []string                 // turn ids, oldest first
	current       string                   // the latest turn
	speechEnds    map[string]speechEnd     // utterance (user message) id → end of speech
	transcribedIn map[string]time.Duration // utterance id → end of speech to final transcript
	// audioSpans are the spans that synthesised the sentences whose audio
	// came (sentence id → the SpeechAudio's trace meta), until they play.
	audioSpans map[string]trace.SpanContext
	// playing is the open voice.playout span, if any (one player per room:
	// one sentence plays at a time).
	playing *playout
	// records are published in order by one goroutine, off the audio paths.
	records chan func(context.Context)
	// unrecorded counts the records not yet published (a drain waits for
	// them before leaving the room).
	unrecorded atomic.Int64
	// marks are SentencePlayout envelopes for the room's participants, sent
	// in order on the data channel by another goroutine (never behind a
	// JetStream publish).
	marks chan []byte
	// paused is the barge-in waiting for words, if any (bargein.go).
	paused *interruption
	// barging makes one barge-in decision at a time (two users may barge in at once).
	barging sync.Mutex
}

func newTracker(r *Room) *tracker {
	return &tracker{r: r, turns: map[string]*turn{}, speechEnds: map[string]speechEnd{}, transcribedIn: map[string]time.Duration{},
		audioSpans: map[string]trace.SpanContext{}, records: make(chan func(context.Context), 256), marks: make(chan []byte, 256)}
}

func (t *tracker) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			t.endPlayout("", "", playoutUnfinished, 0, time.Now()) // the room closed mid-sentence
			return
		case f := <-t.records:
			f(ctx)
		}
	}
}

// markLoop sends the live playout marks to the room's participants.
func (t *tracker) markLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case frame := <-t.marks:
			if err := t.r.broadcast(frame); err != nil {
				t.r.log.Debug().Err(err).Msg("playout mark")
			}
		}
	}
}

// mark tells the room's participants what happens to a sentence's audio
// (SentencePlayout on the data channel, not stored): they show which
// sentence is heard and, after a barge-in, what was not. A full queue drops
// the mark: it is a view, the record on the stream is the truth.
func (t *tracker) mark(turnID, sentenceID string, seq int32, status protocol.SentencePlayoutStatus, played time.Duration) {
	cid := t.r.cid
	frame, err := protocol.Encode(protocol.New(cid, &protocol.SentencePlayout{ConversationID: cid, MessageID: turnID, SentenceID: sentenceID,
		Sequence: seq, Status: status, PlayedMs: int32(played / time.Millisecond)}))
	if err != nil {
		return
	}
	select {
	case t.marks <- frame:
	default:
	}
}

// follow reads the conversation's StartAnswer, AssistantSentence and
// Transcription envelopes from now on. The consumer has the one filter of
// the conversation's server envelopes (the others are ignored): the
// room-agent's NATS user may create consumers on CONVERSATIONS with that
// filter only (pkg/natsauth).
func (t *tracker) follow(ctx context.Context) error {
	cid := t.r.cid
	cons, err := t.r.d.JS.OrderedConsumer(ctx, bus.StreamConversations, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.ServerAll(cid)},
		DeliverPolicy:  jetstream.DeliverNewPolicy})
	if err != nil {
		return fmt.Errorf("agent: follow %s: %w", cid, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		env, err := protocol.Decode(m.Data())
		if err != nil {
			return
		}
		switch b := env.Body.(type) {
		case *protocol.StartAnswer:
			t.startAnswer(b)
		case *protocol.AssistantSentence:
			t.sentence(b)
		case *protocol.Transcription:
			if b.Final {
				t.transcribed(b.ID)
			}
			t.heard(b)
			t.r.endOfTurn(b, transcriptJobID(m.Headers()), false)
		}
	}, bus.FollowOpts()...) // recreated within ~2 s after a NATS server loss
	if err != nil {
		return fmt.Errorf("agent: follow %s: %w", cid, err)
	}
	spec, err := t.r.d.NC.Subscribe(subjects.SpecTranscript(cid), t.onSpecTranscript)
	if err != nil {
		cc.Stop()
		return fmt.Errorf("agent: follow %s: %w", cid, err)
	}
	go func() { <-ctx.Done(); cc.Stop(); _ = spec.Unsubscribe() }()
	go t.publishLoop(ctx)
	go t.markLoop(ctx)
	return nil
}

func (t *tracker) turnLocked(id string) *turn {
	tu := t.turns[id]
	if tu == nil {
		tu = &turn{id: id, sentences: map[int32]*sentence{}}
		t.turns[id] = tu
		t.order = append(t.order, id)
		if len(t.order) > 32 {
			delete(t.turns, t.order[0])
			t.order = t.order[1:]
		}
	}
	return tu
}

func (t *tracker) startAnswer(b *protocol.StartAnswer) {
	t.mu.Lock()
	tu := t.turnLocked(b.ID)
	tu.userMsg = b.PreviousID
	t.current = b.ID
	t.mu.Unlock()
}

func (t *tracker) sentence(b *protocol.AssistantSentence) {
	if b.ID == nil {
		return
	}
	t.mu.Lock()
	tu := t.turnLocked(b.PreviousID)
	s := tu.sentences[b.Sequence]
	if s == nil || s.id != *b.ID {
		s = &sentence{id: *b.ID, seq: b.Sequence}
		tu.sentences[b.Sequence] = s
	}
	s.final = b.IsFinal != nil && *b.IsFinal // its audio may have played before the sentence was read here
	unplayed := tu.stopped && !s.recorded
	if unplayed {
		s.recorded = true
	}
	sc := tu.trace
	t.mu.Unlock()
	if unplayed { // generated after the user cut in: never heard
		t.record(tu.id, s, protocol.SentencePlayoutStatusUnplayed, 0, sc)
	}
}

// speechEnded notes when an utterance ended, and the voice.end_of_speech
// span that starts its turn's trace.
func (t *tracker) speechEnded(utterance string, at time.Time, span trace.SpanContext) {
	t.mu.Lock()
	t.interrupterEndedLocked(utterance, at)
	t.speechEnds[utterance] = speechEnd{at: at, span: span}
	if len(t.speechEnds) > 64 {
		for k := range t.speechEnds {
			if k != utterance {
				delete(t.speechEnds, k)
				break
			}
		}
	}
	t.mu.Unlock()
}

func (t *tracker) transcribed(utterance string) {
	t.mu.Lock()
	end, ok := t.speechEnds[utterance]
	if ok {
		t.transcribedIn[utterance] = time.Since(end.at)
		if len(t.transcribedIn) > 64 {
			clear(t.transcribedIn)
		}
	}
	t.mu.Unlock()
	if ok {
		t.r.d.Metrics.SpeechEndToTranscript.Observe(time.Since(end.at).Seconds())
	}
}

// onPlay takes the player's events. FirstFrame and SentenceStart come from
// the player's frame loop under its lock: per turn and per sentence, never
// per frame.
func (t *tracker) onPlay(ev PlayEvent) {
	switch ev.Kind {
	case FirstFrame:
		t.mu.Lock()
		tu := t.turnLocked(ev.Turn)
		tu.voiced = true
		end, ok := t.speechEnds[tu.userMsg]
		transcribed, haveTranscript := t.transcribedIn[tu.userMsg]
		if ok {
			delete(t.speechEnds, tu.userMsg)
			delete(t.transcribedIn, tu.userMsg)
			if end.span.IsValid() {
				tu.trace = end.span
			}
		}
		audioSpan := t.audioSpans[ev.Sentence]
		t.mu.Unlock()
		if ok {
			v2v := ev.At.Sub(end.at)
			t.r.d.Metrics.VoiceToVoice.Observe(v2v.Seconds())
			if f := t.r.cfg.OnVoiceToVoice; f != nil {
				f(v2v)
			}
			// From the end of the user's speech to the answer's first frame,
			// under the voice.end_of_speech span that started the turn's
			// trace, linked to the span that made the audio heard first.
			opts := []trace.SpanStartOption{trace.WithTimestamp(end.at)}
			if audioSpan.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: audioSpan}))
			}
			_, span := tracer.Start(withParent(end.span), "voice.turn", opts...)
			span.SetAttributes(attribute.String("alicia.conversation_id", t.r.cid), attribute.String("alicia.message_id", ev.Turn),
				attribute.String("alicia.user_message_id", tu.userMsg), attribute.Int64("alicia.voice_to_voice_us", v2v.Microseconds()))
			if haveTranscript {
				span.SetAttributes(attribute.Int64("alicia.speech_end_to_transcript_us", transcribed.Microseconds()))
			}
			span.End(trace.WithTimestamp(ev.At))
		}
	case SentenceStart:
		t.startPlayout(ev)
		t.mark(ev.Turn, ev.Sentence, ev.Seq, protocol.SentencePlayoutStatusPlaying, 0)
	case SentenceDone:
		sc := t.endPlayout(ev.Turn, ev.Sentence, protocol.SentencePlayoutStatusPlayed, ev.Played, ev.At)
		t.mu.Lock()
		tu := t.turnLocked(ev.Turn)
		s := tu.sentences[ev.Seq]
		if s == nil {
			s = &sentence{id: ev.Sentence, seq: ev.Seq}
			tu.sentences[ev.Seq] = s
		}
		rec := !s.recorded
		s.recorded = true
		t.mu.Unlock()
		if rec {
			t.record(ev.Turn, s, protocol.SentencePlayoutStatusPlayed, ev.Played, sc)
		}
	}
}

// playoutUnfinished is the playout status of a voice.playout span whose
// sentence never reached its last frame nor was cut by a barge-in: the
// room closed, or the player went on without it.
const playoutUnfinished protocol.SentencePlayoutStatus = "unfinished"

// withParent is a context whose span is sc (none when invalid: a root).
func withParent(sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// sentenceAudio notes the span context a sentence's audio came with (the
// tts's span that synthesised it), once per sentence: its first chunk.
func (t *tracker) sentenceAudio(sentenceID string, sc trace.SpanContext) {
	t.mu.Lock()
	if len(t.audioSpans) >= 256 { // sentences whose audio never played
		clear(t.audioSpans)
	}
	t.audioSpans[sentenceID] = sc
	t.mu.Unlock()
}

// startPlayout opens the voice.playout span of the sentence whose first
// frame just went out. The same sentence again (played from its start
// after a false interruption) keeps its span, with an event.
func (t *tracker) startPlayout(ev PlayEvent) {
	t.mu.Lock()
	prev := t.playing
	if prev != nil && prev.turn == ev.Turn && prev.sentence == ev.Sentence {
		t.mu.Unlock()
		prev.span.AddEvent("playout.restarted", trace.WithTimestamp(ev.At))
		return
	}
	t.playing = nil
	tu := t.turnLocked(ev.Turn)
	parent, ok := t.audioSpans[ev.Sentence]
	if ok {
		delete(t.audioSpans, ev.Sentence)
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(ev.At), trace.WithAttributes(
		attribute.String("alicia.conversation_id", t.r.cid), attribute.String("alicia.message_id", ev.Turn),
		attribute.String("alicia.sentence_id", ev.Sentence), attribute.Int("alicia.sentence.sequence", int(ev.Seq)))}
	switch {
	case !parent.IsValid():
		parent = tu.trace // audio without trace meta: under the turn
	case !tu.trace.IsValid():
		tu.trace = parent
	case tu.trace.TraceID() != parent.TraceID():
		// A speculative answer's audio is in the trace of its speculative
		// transcript, not in the end of speech's: linked to it.
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: tu.trace}))
	}
	_, span := tracer.Start(withParent(parent), "voice.playout", opts...)
	tu.played = span.SpanContext()
	t.playing = &playout{span: span, turn: ev.Turn, sentence: ev.Sentence}
	t.mu.Unlock()
	if prev != nil { // cut without a word to the tracker
		endSpan(prev.span, playoutUnfinished, 0, ev.At)
	}
}

// endPlayout ends the open voice.playout span, if it is of turnID and
// sentenceID (an empty one matches any), with status and how much was
// played, and returns its span context — else the turn's, for the
// SentencePlayout record.
func (t *tracker) endPlayout(turnID, sentenceID string, status protocol.SentencePlayoutStatus, played time.Duration, at time.Time) trace.SpanContext {
	t.mu.Lock()
	po := t.playing
	if po == nil || turnID != "" && po.turn != turnID || sentenceID != "" && po.sentence != sentenceID {
		var sc trace.SpanContext
		if tu := t.turns[turnID]; tu != nil {
			sc = tu.trace
		}
		t.mu.Unlock()
		return sc
	}
	t.playing = nil
	t.mu.Unlock()
	endSpan(po.span, status, played, at)
	return po.span.SpanContext()
}

func endSpan(span trace.Span, status protocol.SentencePlayoutStatus, played time.Duration, at time.Time) {
	span.SetAttributes(attribute.String("alicia.playout_status", string(status)), attribute.Int64("alicia.played_ms", played.Milliseconds()))
	span.End(trace.WithTimestamp(at))
}

// busy reports whether the agent is answering: a turn whose audio is
// playing or still to come.
func (t *tracker) busy() (string, bool) {
	if t.r.player.Busy() {
		return "", true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tu := t.turns[t.current]
	if tu == nil || tu.stopped {
		return "", false
	}
	for _, s := range tu.sentences {
		if s.final && s.recorded {
			return "", false // played to its end
		}
	}
	return tu.id, true
}

// speaking reports whether a turn is being spoken: audio playing or
// queued, or a turn that has played and whose last sentence has not yet,
// or a SentencePlayout of what was played still to be published. Unlike
// busy, a turn not voiced yet (the llm still thinking, or a text answer
// that will never be) does not count.
func (t *tracker) speaking() bool {
	if t.r.player.Busy() || t.unrecorded.Load() > 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tu := t.turns[t.current]
	if tu == nil || tu.stopped || !tu.voiced {
		return false
	}
	for _, s := range tu.sentences {
		if s.final && s.recorded {
			return false
		}
	}
	return true
}

func (t *tracker) enqueue(f func(context.Context)) {
	t.unrecorded.Add(1)
	wrapped := func(ctx context.Context) {
		defer t.unrecorded.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		f(ctx)
	}
	select {
	case t.records <- wrapped:
	default: // a full queue means JetStream is stuck: publish beside it rather than block audio
		go wrapped(t.r.ctx)
	}
}

// record publishes a SentencePlayout. Records go out in order, within
// milliseconds, long before the user's next message (which waits for the
// end-pointing silence and the transcription) is published. sc, the
// sentence's voice.playout span (or a span of its turn), goes into its meta:
// persistence stores it in the turn's trace.
func (t *tracker) record(turnID string, s *sentence, status protocol.SentencePlayoutStatus, played time.Duration, sc trace.SpanContext) {
	t.mark(turnID, s.id, s.seq, status, played)
	cid := t.r.cid
	env := protocol.New(cid, &protocol.SentencePlayout{ConversationID: cid, MessageID: turnID, SentenceID: s.id, Sequence: s.seq,
		Status: status, PlayedMs: int32(played / time.Millisecond)})
	t.enqueue(func(ctx context.Context) {
		if _, err := t.r.pub.PublishAgent(withSpan(ctx, sc), env, s.id+":playout"); err != nil {
			t.r.log.Error().Err(err).Str("sentence_id", s.id).Msg("publish SentencePlayout")
		}
	})
}

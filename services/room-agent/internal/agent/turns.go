package agent

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	text     string
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

// tracker follows the conversation's answers on the stream, times the
// voice turn, and records what was played.
type tracker struct {
	r *Room
	m turnMetrics

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
	// backs are the utterances heard over an answer as backchannels or as
	// its echo, kept until their final job asks (Overheard), at most maxBacks.
	backs map[string]overheard
	// echoLike are the utterances whose sound was like what was played
	// (noteEchoLike), kept until their final job asks, at most maxBacks.
	echoLike map[string]bool
	// barging makes one barge-in decision at a time (two users may barge in at once).
	barging sync.Mutex
	// held are hands-free utterances' audio records waiting to be known
	// addressed (handsfree.go).
	held heldRecords
}

func newTracker(r *Room, m turnMetrics) *tracker {
	return &tracker{r: r, m: m, turns: map[string]*turn{}, speechEnds: map[string]speechEnd{}, transcribedIn: map[string]time.Duration{},
		audioSpans: map[string]trace.SpanContext{}, backs: map[string]overheard{}, echoLike: map[string]bool{}, records: make(chan func(context.Context), 256), marks: make(chan []byte, 256)}
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
		t.r.stats.saw(env.Body)
		switch b := env.Body.(type) {
		case *protocol.StartAnswer:
			t.startAnswer(b)
		case *protocol.AssistantSentence:
			t.sentence(b)
		case *protocol.Transcription:
			if b.Final {
				t.transcribed(b.ID)
				t.r.addressed(b)
			}
			t.heard(b)
			t.r.endOfTurn(b, transcriptJobID(m.Headers()), false)
		}
	}, bus.FollowOpts()...) // recreated within ~2 s after a NATS server loss
	if err != nil {
		return fmt.Errorf("agent: follow %s: %w", cid, err)
	}
	go func() { <-ctx.Done(); cc.Stop() }()
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
	s.text = b.Text
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
		t.m.speechEndToTranscript(time.Since(end.at))
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
			t.m.voiceToVoice(v2v)
			t.voiceTurnSpan(ev, tu.userMsg, end, audioSpan, transcribed, haveTranscript)
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

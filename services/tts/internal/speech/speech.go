// Package speech is the tts's use case: speaking the voice turns. The
// StartAnswer of every answer goes through one durable consumer shared by
// all replicas; the replica that takes a voice turn owns it until its last
// sentence. Every replica hears every AssistantSentence on core NATS and
// routes it to the turn it holds (reading CONVERSATIONS for what it missed),
// so a turn's sentences are synthesised by one replica, one after another
// in sequence order, at most MaxAhead ahead of the estimated playout; each
// sentence's audio goes out in order as SpeechAudio chunks on core NATS and
// its SentenceAudio on JetStream. A ControlStop halts the turn at once.
// The first sentence of a preemptive answer may be synthesised ahead and
// held in memory until a turn here speaks it (ahead.go).
package speech

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/tts/internal/metrics"
	"github.com/alicia-voice/alicia/services/tts/internal/synth"
)

var tracer = otel.Tracer("github.com/alicia-voice/alicia/services/tts")

// Synthesizer turns text into mono 16-bit PCM at synth.Rate, emitted as it
// is produced (internal/synth.OpenAI, internal/synth.Espeak).
type Synthesizer interface {
	Synthesize(ctx context.Context, text string, v synth.Voice, emit synth.Emit) error
	// Engine names the backend and model or voice (SentenceAudio.engine).
	Engine() string
}

// Deps are the speaker's collaborators.
type Deps struct {
	NC            *nats.Conn
	Conversations jetstream.Stream // CONVERSATIONS, for direct gets
	Publisher     *bus.Publisher
	Synth         Synthesizer
	// Prefs gives each conversation's voice, speed and language (nil: the
	// backend's configured voice for all).
	Prefs   *prefs.Cache
	Metrics *metrics.Metrics
	Log     zerolog.Logger
}

// Settings tune the speaker.
type Settings struct {
	Chunk      time.Duration // audio per SpeechAudio envelope
	FirstChunk time.Duration // a sentence's first chunk goes out once this much audio is in
	MaxAhead   int           // synthesised sentences waiting for playout, at most
	MaxTurns   int           // turns spoken at once by this replica
	AckWait    time.Duration // the turn consumer's AckWait (heartbeats at a third of it)
	TurnIdle   time.Duration // a turn without a sentence for this long is over
	MaxLag     time.Duration // a turn older than this when taken is not spoken
	Timeout    time.Duration // one synthesis request
	RetryDelay time.Duration // before the one retry of a failed synthesis
	StoreAudio bool          // SentenceAudio carries the PCM
	// AheadTTL keeps a sentence synthesised ahead (SpecSpeak) this long
	// waiting for its turn; 0 synthesises nothing ahead.
	AheadTTL time.Duration
	// PublishTimeout bounds a JetStream publish (SentenceAudio, ErrorMessage).
	PublishTimeout time.Duration
}

// Speaker speaks voice turns. Its methods are safe for concurrent use.
type Speaker struct {
	d      Deps
	s      Settings
	stops  *stops
	active atomic.Int64
	wg     sync.WaitGroup
	format string
	ahead  *aheadStore // nil when AheadTTL is 0
	// draining ends when the replica stops taking turns (Run's ctx): each
	// turn finishes the sentence it is speaking, then hands itself back.
	draining context.Context
}

// New returns a speaker.
func New(d Deps, s Settings) *Speaker {
	if s.FirstChunk <= 0 || s.FirstChunk > s.Chunk {
		s.FirstChunk = min(s.Chunk, 20*time.Millisecond)
	}
	if s.PublishTimeout <= 0 {
		s.PublishTimeout = 5 * time.Second
	}
	sp := &Speaker{d: d, s: s, stops: newStops(), format: synth.Format, draining: context.Background()}
	if s.AheadTTL > 0 {
		sp.ahead = newAheadStore(s.AheadTTL, sp.countAhead)
	}
	return sp
}

// ConsumerConfig is the durable consumer of StartAnswers every replica
// pulls from. A turn stays pending (heartbeated) while it is spoken, so
// MaxAckPending bounds the voice turns spoken at once by all replicas.
func ConsumerConfig(name string, ackWait time.Duration, maxPending int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "tts: answers to speak (StartAnswer); the replica that takes a voice turn reads its sentences",
		FilterSubject: subjects.AllOfType(subjects.OriginServer, protocol.TypeStartAnswer),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: maxPending,
		MaxDeliver:    5,
		// A first start does not speak the whole history.
		DeliverPolicy: jetstream.DeliverNewPolicy,
		MemoryStorage: true,
	}
}

// Run listens for ControlStops (and, with AheadTTL, for sentences to
// synthesise ahead) and takes turns from cons until ctx is cancelled. Then
// it drains: it takes no more turns nor sentences to synthesise ahead, and
// each turn finishes the sentence it is speaking and hands itself back
// (nak; another replica resumes it after its last stored sentence), or is
// acknowledged when its last sentence comes first. When work ends (the stop
// was forced; outside a drain work is ctx) the turns still running are
// halted mid-sentence and handed back.
func (sp *Speaker) Run(ctx, work context.Context, cons jetstream.Consumer) error {
	sp.draining = ctx
	unsubscribe, stopAhead, err := sp.listen()
	if err != nil {
		return err
	}
	defer unsubscribe()
	cc, err := cons.Consume(func(m jetstream.Msg) { sp.take(ctx, m) }, bus.FollowOpts(jetstream.PullMaxMessages(16))...)
	if err != nil {
		return fmt.Errorf("speech: consume: %w", err)
	}
	<-ctx.Done()
	// Drain pulls no more and hands what is buffered to take, which gives
	// it back at once (nak) rather than leave it pending for AckWait.
	cc.Drain()
	stopAhead()
	<-cc.Closed()
	finished := make(chan struct{})
	go func() { sp.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-work.Done():
		for _, t := range sp.stops.all() {
			t.halt(ErrShutdown)
		}
		<-finished
	}
	if sp.ahead != nil {
		sp.ahead.close()
	}
	return nil
}

// onStop handles a ControlStop on core NATS: every replica hears it, the
// one speaking the turn halts it. A stop of any type (speech, generation,
// all) ends the turn's speech.
func (sp *Speaker) onStop(_ context.Context, _ protocol.Envelope, stop *protocol.ControlStop, in bus.Inbound) error {
	if sp.stops.stop(in.Conversation, deref(stop.TargetID)) {
		sp.d.Log.Debug().Str("conversation_id", in.Conversation).Msg("speech stopped")
	}
	return nil
}

// take decides what to do with one StartAnswer; it never blocks the consumer.
func (sp *Speaker) take(ctx context.Context, m jetstream.Msg) {
	if ctx.Err() != nil {
		// Delivered while the replica stops taking turns: another takes it.
		settle(ctx, sp.d.Log, m, bus.GiveBack())
		return
	}
	md, err := m.Metadata()
	if err != nil {
		settle(ctx, sp.d.Log, m, bus.Fail(fmt.Errorf("StartAnswer without metadata: %w", err)))
		return
	}
	env, err := protocol.Decode(m.Data())
	if err != nil {
		settle(ctx, sp.d.Log, m, bus.Fail(fmt.Errorf("undecodable StartAnswer: %w", err)))
		return
	}
	sa, ok := env.Body.(*protocol.StartAnswer)
	if !ok || !spoken(sa) {
		sp.d.Metrics.Turns.WithLabelValues("text").Inc()
		settle(ctx, sp.d.Log, m, bus.Ack())
		return
	}
	log := sp.d.Log.With().Str("conversation_id", sa.ConversationID).Str("turn_id", sa.ID).Logger()
	switch {
	case time.Since(md.Timestamp) > sp.s.MaxLag:
		sp.d.Metrics.Turns.WithLabelValues("stale").Inc()
		log.Warn().Dur("age", time.Since(md.Timestamp)).Msg("voice turn too old to speak")
		settle(ctx, log, m, bus.Ack())
		return
	case sp.stops.wasStopped(sa.ID):
		sp.d.Metrics.Turns.WithLabelValues("stopped").Inc()
		settle(ctx, log, m, bus.Ack())
		return
	case sp.stops.holds(sa.ID):
		// A redelivery of a turn spoken here (a heartbeat came late): it
		// stays here.
		settle(ctx, log, m, bus.Ack())
		return
	}
	if n := sp.active.Add(1); n > int64(sp.s.MaxTurns) {
		sp.active.Add(-1)
		sp.d.Metrics.Turns.WithLabelValues("busy").Inc()
		settle(ctx, sp.d.Log, m, bus.RetryIn(100*time.Millisecond, nil)) // another replica takes it
		return
	}
	t := sp.newTurn(ctx, m, md, sa, log)
	sp.stops.begin(t)
	sp.wg.Add(1)
	go func() {
		defer sp.wg.Done()
		defer sp.active.Add(-1)
		defer sp.stops.end(t)
		t.run()
	}()
}

// spoken reports whether an answer is to be spoken.
func spoken(sa *protocol.StartAnswer) bool {
	return sa.AnswerType != nil && (*sa.AnswerType == protocol.StartAnswerAnswerTypeVoice || *sa.AnswerType == protocol.StartAnswerAnswerTypeTextVoice)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

package speech

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// turn is one voice answer spoken by this replica.
type turn struct {
	sp       *Speaker
	cid, id  string
	msg      jetstream.Msg // its StartAnswer, pending until the turn is over
	startSeq uint64        // the StartAnswer's CONVERSATIONS sequence
	resumed  bool          // redelivered: another replica spoke part of it
	log      zerolog.Logger
	pace     *pacer

	ctx    context.Context // ended by a stop or a shutdown
	cancel context.CancelCauseFunc

	mu     sync.Mutex // orders halt against publishing audio
	halted bool
}

// sentence is an AssistantSentence to speak, with its envelope and when it
// was stored.
type sentence struct {
	env    protocol.Envelope
	body   *protocol.AssistantSentence
	id     string
	stored time.Time
}

func (sp *Speaker) newTurn(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, sa *protocol.StartAnswer, log zerolog.Logger) *turn {
	// Only halt ends a turn: a shutdown halts with ErrShutdown, so the
	// turn knows to hand itself back rather than count as stopped.
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	return &turn{
		sp: sp, cid: sa.ConversationID, id: sa.ID, msg: m, startSeq: md.Sequence.Stream,
		resumed: md.NumDelivered > 1, log: log, pace: newPacer(sp.s.MaxAhead), ctx: tctx, cancel: cancel,
	}
}

// halt ends the turn: after it returns nothing more of the turn is
// published, and its synthesis is cancelled.
func (t *turn) halt(cause error) {
	t.mu.Lock()
	t.halted = true
	t.mu.Unlock()
	t.cancel(cause)
}

// run speaks the turn and settles its StartAnswer: acknowledged when the
// turn is over or stopped, handed back on shutdown.
func (t *turn) run() {
	m := t.sp.d.Metrics
	m.ActiveTurns.Inc()
	defer m.ActiveTurns.Dec()
	defer t.cancel(nil)
	hbDone := make(chan struct{})
	go t.heartbeat(hbDone)
	defer close(hbDone)

	after := int32(0)
	if t.resumed {
		after = t.spokenBefore()
		m.Turns.WithLabelValues("resumed").Inc()
	}
	queue := make(chan sentence, 64)
	rctx, stopReading := context.WithCancelCause(t.ctx)
	defer stopReading(nil)
	readErr := make(chan error, 1)
	go func() { readErr <- t.read(rctx, after, queue) }()

	for s := range queue {
		if t.pace.wait(t.ctx) != nil {
			break
		}
		t.speak(s)
		if t.ctx.Err() != nil {
			break
		}
	}
	stopReading(errTurnOver)
	err := <-readErr
	switch cause := context.Cause(t.ctx); {
	case errors.Is(cause, ErrShutdown):
		_ = t.msg.Nak() // another replica resumes after the last stored sentence
		return
	case errors.Is(cause, ErrStopped):
		m.Turns.WithLabelValues("stopped").Inc()
		t.log.Debug().Msg("turn stopped")
	case err != nil && !errors.Is(err, errTurnOver):
		t.log.Warn().Err(err).Msg("reading the turn's sentences failed")
		m.Turns.WithLabelValues("failed").Inc()
	default:
		m.Turns.WithLabelValues("spoken").Inc()
	}
	if err := t.msg.Ack(); err != nil {
		t.log.Warn().Err(err).Msg("ack of the turn failed")
	}
}

// heartbeat keeps the StartAnswer pending while the turn is spoken.
func (t *turn) heartbeat(done <-chan struct{}) {
	tk := time.NewTicker(max(t.sp.s.AckWait/3, 100*time.Millisecond))
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
			_ = t.msg.InProgress()
		}
	}
}

// read feeds queue with the turn's sentences in order, read from
// CONVERSATIONS after the StartAnswer, until the final one, a newer
// answer, the llm's error for this answer, a ControlStop (of this turn or
// untargeted), TurnIdle without a sentence, or ctx ends. Reading the stop
// from the stream too covers a stop published before this replica took
// the turn. It closes queue.
func (t *turn) read(ctx context.Context, after int32, queue chan<- sentence) error {
	defer close(queue)
	cons, err := t.sp.d.JS.OrderedConsumer(ctx, bus.StreamConversations, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{
			subjects.Server(t.cid, protocol.TypeAssistantSentence),
			subjects.Server(t.cid, protocol.TypeStartAnswer),
			subjects.Server(t.cid, protocol.TypeErrorMessage),
			subjects.Client(t.cid, protocol.TypeControlStop),
		},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       t.startSeq + 1,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	msgs := make(chan jetstream.Msg)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(32))
	if err != nil {
		return err
	}
	defer cc.Stop()
	idle := time.NewTimer(t.sp.s.TurnIdle)
	defer idle.Stop()
	last := after
	for {
		var m jetstream.Msg
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-idle.C:
			t.log.Warn().Dur("idle", t.sp.s.TurnIdle).Msg("no sentence for too long; turn over")
			return errTurnOver
		case m = <-msgs:
		}
		env, err := protocol.Decode(m.Data())
		if err != nil {
			continue
		}
		switch b := env.Body.(type) {
		case *protocol.AssistantSentence:
			if b.PreviousID != t.id || b.Sequence <= last {
				continue
			}
			last = b.Sequence
			idle.Reset(t.sp.s.TurnIdle)
			s := sentence{env: env, body: b, id: sentenceID(b), stored: storedAt(m)}
			select {
			case queue <- s:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if b.IsFinal != nil && *b.IsFinal {
				return errTurnOver
			}
		case *protocol.StartAnswer:
			if b.ID != t.id {
				return errTurnOver // the llm moved on to a newer answer
			}
		case *protocol.ErrorMessage:
			if b.OriginatingID != nil && *b.OriginatingID == t.id {
				return errTurnOver // the llm gave up on this answer
			}
		case *protocol.ControlStop:
			if b.TargetID == nil || *b.TargetID == t.id {
				t.sp.stops.mu.Lock()
				t.sp.stops.remember(t.id)
				t.sp.stops.mu.Unlock()
				t.halt(ErrStopped)
				return ErrStopped
			}
		}
	}
}

// spokenBefore is the sequence of the turn's last sentence whose
// SentenceAudio is stored: a redelivered turn resumes after it.
func (t *turn) spokenBefore() int32 {
	ctx, cancel := context.WithTimeout(t.ctx, t.sp.s.PublishTimeout)
	defer cancel()
	m, err := t.sp.d.JS.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return 0
	}
	raw, err := m.GetLastMsgForSubject(ctx, subjects.Agent(t.cid, protocol.TypeSentenceAudio))
	if err != nil || raw.Sequence < t.startSeq {
		return 0
	}
	env, err := protocol.Decode(raw.Data)
	if err != nil {
		return 0
	}
	if a, ok := env.Body.(*protocol.SentenceAudio); ok && a.MessageID == t.id {
		return a.Sequence
	}
	return 0
}

// sentenceID is the sentence's id, or one derived from the answer and
// sequence when the llm gave none.
func sentenceID(b *protocol.AssistantSentence) string {
	if b.ID != nil && *b.ID != "" {
		return *b.ID
	}
	return deriveID("ams", b.PreviousID, b.Sequence)
}

func storedAt(m jetstream.Msg) time.Time {
	if md, err := m.Metadata(); err == nil {
		return md.Timestamp
	}
	return time.Now()
}

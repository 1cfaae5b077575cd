package speech

import (
	"cmp"
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

	inbox chan sentence // from core NATS (listen)
	over  chan struct{} // no more sentences will come

	mu     sync.Mutex // orders halt against publishing audio
	halted bool
}

// sentence is an AssistantSentence to speak, with its envelope and when it
// arrived (or was stored, when read from the stream).
type sentence struct {
	env      protocol.Envelope
	body     *protocol.AssistantSentence
	id       string
	received time.Time
}

func (sp *Speaker) newTurn(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, sa *protocol.StartAnswer, log zerolog.Logger) *turn {
	// Only halt ends a turn: a shutdown halts with ErrShutdown, so the
	// turn knows to hand itself back rather than count as stopped.
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	return &turn{
		sp: sp, cid: sa.ConversationID, id: sa.ID, msg: m, startSeq: md.Sequence.Stream,
		resumed: md.NumDelivered > 1, log: log, pace: newPacer(sp.s.MaxAhead), ctx: tctx, cancel: cancel,
		inbox: make(chan sentence, 256), over: make(chan struct{}, 1),
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
	// The StartAnswer stays pending while the turn is spoken, stopped or not.
	hbCtx, stopBeat := context.WithCancel(context.Background())
	go bus.Heartbeat(hbCtx, t.msg, t.sp.s.AckWait)
	defer stopBeat()

	after := int32(0)
	if t.resumed {
		after = t.spokenBefore()
		m.Turns.WithLabelValues("resumed").Inc()
	}
	queue := make(chan sentence, 64)
	rctx, stopReading := context.WithCancelCause(t.ctx)
	defer stopReading(nil)
	readErr := make(chan error, 1)
	go func() { readErr <- t.follow(rctx, after, queue) }()

	// Between sentences a draining replica hands the turn back; the
	// sentence being spoken is finished first.
	between, stopBetween := context.WithCancel(t.ctx)
	defer stopBetween()
	defer context.AfterFunc(t.sp.draining, stopBetween)()
	handBack := false
speaking:
	for {
		var s sentence
		select {
		case next, ok := <-queue:
			if !ok {
				break speaking
			}
			s = next
		case <-between.Done():
		}
		if between.Err() == nil {
			_ = t.pace.wait(between)
		}
		if between.Err() != nil {
			// Stopped or halted (t.ctx), or draining: hand back.
			handBack = t.ctx.Err() == nil
			break
		}
		t.speak(s)
		if t.ctx.Err() != nil || (s.body.IsFinal != nil && *s.body.IsFinal) {
			break
		}
	}
	stopReading(errTurnOver)
	err := <-readErr
	switch cause := context.Cause(t.ctx); {
	case errors.Is(cause, ErrShutdown) || handBack:
		settle(t.ctx, t.log, t.msg, bus.GiveBack()) // another replica resumes after the last stored sentence
		return
	case errors.Is(cause, ErrStopped):
		m.Turns.WithLabelValues("stopped").Inc()
		t.log.Debug().Msg("turn stopped")
	case err != nil && !errors.Is(err, errTurnOver):
		// Reading the stream failed (NATS trouble): try the turn again
		// later, here or elsewhere, after what was spoken.
		t.log.Warn().Err(err).Msg("reading the turn's sentences failed; retrying the turn")
		m.Turns.WithLabelValues("failed").Inc()
		settle(t.ctx, t.log, t.msg, bus.RetryIn(time.Second, nil))
		return
	default:
		m.Turns.WithLabelValues("spoken").Inc()
	}
	settle(t.ctx, t.log, t.msg, bus.Ack())
}

// follow feeds queue with the turn's sentences in sequence order until the
// final one, a newer answer or the llm's error for this one, TurnIdle
// without a sentence, or ctx ends. Sentences come from core NATS (routed
// here by listen, orphans included); what came before this replica held
// the turn, or slipped past it, is read from CONVERSATIONS: at the start,
// on a gap in the sequence, and when the turn goes quiet. A ControlStop
// stored before the turn was taken stops it here. It closes queue.
func (t *turn) follow(ctx context.Context, after int32, queue chan<- sentence) error {
	defer close(queue)
	f := &follower{t: t, next: after + 1, pending: map[int32]sentence{},
		sentences: newStreamReader(t.sp.d.Conversations, subjects.Server(t.cid, protocol.TypeAssistantSentence), t.startSeq+1)}
	defer f.sentences.close()
	if err := f.catchUp(ctx, true); err != nil {
		return err
	}
	idle := time.NewTimer(t.sp.s.TurnIdle)
	defer idle.Stop()
	quiet := time.NewTicker(quietCheck)
	defer quiet.Stop()
	lastInput := time.Now()
	for {
		done, err := f.flush(ctx, queue)
		if done || err != nil {
			return cmp.Or(err, errTurnOver)
		}
		if len(f.pending) > 0 && time.Since(f.lastCatchUp) > gapWait {
			if err := f.catchUp(ctx, false); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case s := <-t.inbox:
			f.add(s)
			lastInput = time.Now()
			idle.Reset(t.sp.s.TurnIdle)
		case <-t.over:
			f.over = true
			if err := f.catchUp(ctx, false); err != nil {
				return err
			}
		case <-quiet.C:
			if time.Since(lastInput) >= quietCheck && time.Since(f.lastCatchUp) >= quietCheck {
				if err := f.catchUp(ctx, false); err != nil {
					return err
				}
			}
		case <-idle.C:
			t.log.Warn().Dur("idle", t.sp.s.TurnIdle).Msg("no sentence for too long; turn over")
			return errTurnOver
		}
	}
}

const (
	// gapWait lets a sentence that is out of order on core NATS arrive
	// before the stream is read for it.
	gapWait = 100 * time.Millisecond
	// quietCheck: a turn waiting this long for its next sentence reads the
	// stream in case one slipped past.
	quietCheck = 2 * time.Second
)

// follower orders one turn's sentences.
type follower struct {
	t           *turn
	next        int32 // sequence to speak next
	pending     map[int32]sentence
	over        bool          // no more sentences will be published
	sentences   *streamReader // the turn's sentences stored in CONVERSATIONS
	lastCatchUp time.Time
}

func (f *follower) add(s sentence) {
	if s.body.Sequence >= f.next {
		f.pending[s.body.Sequence] = s
	}
}

// flush queues the sentences that are next in order; done when the final
// one is queued, or when no more will come and none is waiting.
func (f *follower) flush(ctx context.Context, queue chan<- sentence) (done bool, err error) {
	for {
		s, ok := f.pending[f.next]
		if !ok {
			return f.over, nil
		}
		delete(f.pending, f.next)
		f.next++
		select {
		case queue <- s:
		case <-ctx.Done():
			return true, context.Cause(ctx)
		}
		if s.body.IsFinal != nil && *s.body.IsFinal {
			return true, nil
		}
	}
}

// catchUp reads the turn's sentences stored since the last catch-up; the
// first one also looks for a stop of the turn and a newer answer stored
// before the turn was taken.
func (f *follower) catchUp(ctx context.Context, first bool) error {
	t := f.t
	f.lastCatchUp = time.Now()
	err := f.sentences.read(ctx, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		env, err := protocol.Decode(m.Data())
		if err != nil {
			return nil
		}
		if b, ok := env.Body.(*protocol.AssistantSentence); ok && b.PreviousID == t.id {
			f.add(sentence{env: env, body: b, id: sentenceID(b), received: md.Timestamp})
		}
		return nil
	})
	if err != nil || !first {
		return err
	}
	stopped, err := t.stoppedBefore(ctx)
	if err != nil {
		return err
	}
	if stopped {
		t.sp.stops.mu.Lock()
		t.sp.stops.remember(t.id)
		t.sp.stops.mu.Unlock()
		t.halt(ErrStopped)
		return ErrStopped
	}
	if m, err := t.sp.d.Conversations.GetLastMsgForSubject(ctx, subjects.Server(t.cid, protocol.TypeStartAnswer)); err == nil && m.Sequence > t.startSeq {
		f.over = true
	}
	return nil
}

// stoppedBefore reports whether a ControlStop of the turn (or of whatever
// was playing) was stored after its StartAnswer. The last stop of the
// conversation answers at once; only when it is newer than the turn and
// names another answer are the stops since the turn read one by one.
func (t *turn) stoppedBefore(ctx context.Context) (bool, error) {
	subject := subjects.Client(t.cid, protocol.TypeControlStop)
	last, err := t.sp.d.Conversations.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, err
	case last.Sequence <= t.startSeq:
		return false, nil
	}
	if stopsAnswer(last.Data, t.id) {
		return true, nil
	}
	r := newStreamReader(t.sp.d.Conversations, subject, t.startSeq+1)
	defer r.close()
	stopped := false
	err = r.read(ctx, func(m jetstream.Msg, _ *jetstream.MsgMetadata) error {
		stopped = stopped || stopsAnswer(m.Data(), t.id)
		return nil
	})
	return stopped, err
}

// stopsAnswer reports whether the stored ControlStop stops the answer id.
func stopsAnswer(data []byte, id string) bool {
	env, err := protocol.Decode(data)
	if err != nil {
		return false
	}
	b, ok := env.Body.(*protocol.ControlStop)
	return ok && (b.TargetID == nil || *b.TargetID == id)
}

// spokenBefore is the sequence of the turn's last sentence whose
// SentenceAudio is stored: a redelivered turn resumes after it.
func (t *turn) spokenBefore() int32 {
	ctx, cancel := context.WithTimeout(t.ctx, t.sp.s.PublishTimeout)
	defer cancel()
	raw, err := t.sp.d.Conversations.GetLastMsgForSubject(ctx, subjects.Agent(t.cid, protocol.TypeSentenceAudio))
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
	return protocol.DeriveID("ams", b.PreviousID, b.Sequence)
}

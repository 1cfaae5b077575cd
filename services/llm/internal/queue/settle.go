package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// settler settles the turns of the consumer (bus.Settler): a failed turn
// is terminated without a dead letter (the llm reports it to the client
// through GiveUp instead).
func (c *Consumer) settler(log zerolog.Logger) *bus.Settler {
	backoff := c.Backoff
	if backoff == nil {
		backoff = func(uint64) time.Duration { return time.Second }
	}
	return &bus.Settler{Consumer: Stream, MaxDeliver: c.MaxDeliver, Backoff: backoff, Log: log}
}

// handle runs one turn (heartbeated by its taker) until it is done
// (acked), given up (terminated) or to be given back (shutdown); a failure
// is retried here, after Backoff, so the conversation's later turns wait
// for it (a panic is not retried).
// attempt is the turn's start (the budget's count; without a budget, its
// delivery).
//
// A turn to be given back is not settled here (givenBack true): release
// gives it back with the partition's waiting turns once no pull of this
// replica is pending, so the server hands it to another replica, not back
// to this one's last pull (which would count a delivery for nothing).
func (c *Consumer) handle(ctx, turnCtx context.Context, m jetstream.Msg, t Turn, attempt uint64, log zerolog.Logger) (givenBack bool) {
	hctx, cancel := context.WithCancel(turnCtx)
	defer cancel()
	log = log.With().Str("conversation_id", t.ConversationID).Uint64("seq", t.Sequence).Logger()
	s := c.settler(log)
	for {
		err := bus.Protect(log, func() error { return c.Handler(hctx, t) })
		o := s.Judge(turnCtx, err, attempt)
		switch o.Verdict {
		case bus.VerdictRetry:
			log.Warn().Err(err).Dur("retry_in", o.Delay).Msg("turn failed; will retry")
			select {
			case <-time.After(o.Delay):
				t.Delivered++
				attempt++
				continue
			case <-ctx.Done():
				// Stopping: another replica retries it.
				o = bus.GiveBack()
			}
		case bus.VerdictFail:
			if c.GiveUp != nil {
				c.GiveUp(turnCtx, t, err)
			}
		}
		if o.Verdict == bus.VerdictGiveBack {
			return true
		}
		s.Settle(turnCtx, m, o)
		return false
	}
}

func (c *Consumer) decode(m jetstream.Msg, t *Turn) error {
	p, err := subjects.ParseTurn(m.Subject())
	if err != nil {
		return err
	}
	t.ConversationID = p.ConversationID
	if t.Sequence, err = SourceSequence(m.Headers().Get(SourceHeader)); err != nil {
		return err
	}
	if t.Env, err = protocol.Decode(m.Data()); err != nil {
		return err
	}
	t.User, _ = t.Env.Meta[edge.MetaUserID].(string)
	if t.Env.ConversationID != t.ConversationID {
		return fmt.Errorf("queue: envelope of %q on the subject of %q", t.Env.ConversationID, t.ConversationID)
	}
	return nil
}

package timers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// MetaTimerID is the meta key naming the timer an assistant message
// delivers, so a client can notify.
const MetaTimerID = "alicia.timer_id"

// deliverTimeout bounds one delivery attempt; callWait how long the
// room-agents are asked whether a call is open.
const (
	deliverTimeout = 20 * time.Second
	callWait       = time.Second
)

// MessageID is the assistant message a timer becomes when it fires: derived
// from the timer, so every replica and every attempt publishes the same one.
func MessageID(timerID string) string { return protocol.DeriveID("am", "timer", timerID) }

// deliver claims a due timer and, when the claim is this replica's,
// publishes its message and its fired state.
func (s *Scheduler) deliver(t *protocol.Timer) {
	ctx, cancel := context.WithTimeout(s.ctx, deliverTimeout)
	defer cancel()
	log := s.log.With().Str("timer_id", t.ID).Str("conversation_id", t.ConversationID).Logger()
	mine, retry, ended, err := s.claim(ctx, t.ID)
	if err != nil {
		if s.ctx.Err() == nil {
			log.Warn().Err(err).Msg("timer not claimed; trying again")
			s.failed()
		}
		s.retryLater(t.ID, s.now().Add(2*time.Second))
		return
	}
	if ended {
		s.done(t.ID) // fired or cancelled, though this replica missed it live
		return
	}
	if !mine {
		// Another replica delivers it; its fired state ends it here. If
		// that replica dies first, the claim is taken over at retry.
		s.retryLater(t.ID, retry)
		return
	}
	if err := s.publish(ctx, t); err != nil {
		if s.ctx.Err() == nil {
			log.Warn().Err(err).Msg("timer not delivered; trying again")
			s.failed()
		}
		s.retryLater(t.ID, s.now().Add(2*time.Second))
		return
	}
	s.done(t.ID)
}

func (s *Scheduler) failed() {
	if s.hooks.Failed != nil {
		s.hooks.Failed()
	}
}

// claim makes this replica the one delivering timer id (a compare-and-set
// in ClaimBucket). A claim another replica made is taken over once older
// than ClaimTimeout (that replica died mid-delivery) unless the timer is
// stored fired or cancelled by then (ended: this replica missed that
// state live); until then retry is when to look again.
func (s *Scheduler) claim(ctx context.Context, id string) (mine bool, retry time.Time, ended bool, err error) {
	now := s.now()
	e, err := s.kv.Get(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		err = bus.WriteRevision(ctx, s.kv, id, []byte(s.replica), 0)
	case err != nil:
		return false, time.Time{}, false, fmt.Errorf("timers: read claim: %w", err)
	case string(e.Value()) == s.replica:
		return true, time.Time{}, false, nil // this replica's, from an attempt that failed
	default:
		if until := e.Created().Add(s.cfg.ClaimTimeout); now.Before(until) {
			return false, until, false, nil
		}
		status, serr := timerStatus(ctx, s.db, id)
		if serr != nil {
			return false, time.Time{}, false, serr
		}
		if status != "" && status != string(protocol.TimerStatusScheduled) {
			return false, time.Time{}, true, nil
		}
		err = bus.WriteRevision(ctx, s.kv, id, []byte(s.replica), e.Revision())
	}
	if errors.Is(err, bus.ErrKVConflict) {
		return false, now.Add(s.cfg.ClaimTimeout), false, nil
	}
	if err != nil {
		return false, time.Time{}, false, fmt.Errorf("timers: claim: %w", err)
	}
	return true, time.Time{}, false, nil
}

// publish delivers t: one assistant message in its conversation (spoken
// when a call is open there), then its fired state. Every publish has a
// Nats-Msg-Id derived from the timer: a taken-over delivery repeats none.
func (s *Scheduler) publish(ctx context.Context, t *protocol.Timer) error {
	tip, exists, err := conversationTip(ctx, s.db, t.ConversationID)
	if err != nil {
		return err
	}
	now := s.now()
	if !exists {
		// Its conversation was deleted: nothing to deliver to.
		c := *t
		c.Status, c.Timestamp = protocol.TimerStatusCancelled, now.UnixMilli()
		_, err := s.pub.PublishSystem(ctx, protocol.New("", &c), "timer:"+t.ID+":cancelled")
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, callWait)
	call, err := rpc.VoiceCallOpen(cctx, s.nc, t.ConversationID)
	cancel()
	if err != nil {
		s.log.Warn().Err(err).Str("timer_id", t.ID).Msg("room-agents did not say whether a call is open; delivering as a message")
	}
	as, answer := protocol.TimerDeliveredAsMessage, protocol.StartAnswerAnswerTypeText
	if call {
		as, answer = protocol.TimerDeliveredAsSpoken, protocol.StartAnswerAnswerTypeTextVoice
	}
	mid := MessageID(t.ID)
	meta := map[string]any{MetaTimerID: t.ID, edge.MetaUserID: t.UserID}
	start := protocol.New(t.ConversationID, &protocol.StartAnswer{ID: mid, PreviousID: tip, ConversationID: t.ConversationID, AnswerType: &answer})
	start.Meta = meta
	if _, err := s.pub.PublishServer(ctx, start, "timer:"+t.ID+":start"); err != nil {
		return err
	}
	sent := protocol.New(t.ConversationID, &protocol.AssistantSentence{ID: protocol.Ptr(protocol.DeriveID("ams", mid, 1)), PreviousID: mid,
		ConversationID: t.ConversationID, Sequence: 1, Text: s.text(t), IsFinal: protocol.Ptr(true)})
	sent.Meta = meta
	if _, err := s.pub.PublishServer(ctx, sent, "timer:"+t.ID+":s:1"); err != nil {
		return err
	}
	fired := *t
	fired.Status, fired.DeliveredAs, fired.MessageID, fired.Timestamp = protocol.TimerStatusFired, &as, &mid, s.now().UnixMilli()
	if _, err := s.pub.PublishSystem(ctx, protocol.New("", &fired), "timer:"+t.ID+":fired"); err != nil {
		return err
	}
	if s.hooks.Delivered != nil {
		s.hooks.Delivered(string(as), s.now().Sub(time.UnixMilli(t.DueAt)))
	}
	s.log.Info().Str("timer_id", t.ID).Str("conversation_id", t.ConversationID).Str("delivered_as", string(as)).
		Dur("late", s.now().Sub(time.UnixMilli(t.DueAt))).Msg("timer delivered")
	return nil
}

// text is what the person reads or hears when t fires.
func (s *Scheduler) text(t *protocol.Timer) string {
	label := ""
	if t.Label != nil {
		label = *t.Label
	}
	if t.Kind == protocol.TimerKindReminder {
		if label == "" {
			return "This is your reminder."
		}
		return "Reminder: " + label + "."
	}
	d := spokenDuration(time.Duration(t.DueAt-t.CreatedAt) * time.Millisecond)
	if label == "" {
		return "Your " + d + " timer is done."
	}
	return "Your " + d + " timer for " + label + " is done."
}

// spokenDuration is a duration as said aloud: "10-minute", "1-hour 30-minute".
func spokenDuration(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	out := ""
	add := func(n int, unit string) {
		if n == 0 {
			return
		}
		if out != "" {
			out += " "
		}
		out += fmt.Sprintf("%d-%s", n, unit)
	}
	add(h, "hour")
	add(m, "minute")
	add(sec, "second")
	if out == "" {
		return "0-second"
	}
	return out
}

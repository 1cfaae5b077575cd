package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/clip"
)

// Verdict is what the server is told about one delivery.
type Verdict uint8

const (
	// VerdictAck: done (Ack).
	VerdictAck Verdict = iota
	// VerdictGiveBack: this replica stops; another one (or its restart)
	// takes the message at once (Nak).
	VerdictGiveBack
	// VerdictRetry: deliver it again after the outcome's Delay (NakWithDelay).
	VerdictRetry
	// VerdictFail: redelivery cannot help; the message is dead-lettered
	// (when the Settler has DeadLetters) and terminated with the reason.
	VerdictFail
	// VerdictTerminate: the failure was dealt with already (reported to the
	// client, dead-lettered by the handler); the message is only terminated.
	VerdictTerminate
)

// Outcome is how the handling of one delivery ended.
type Outcome struct {
	Verdict Verdict
	// Delay before the redelivery (VerdictRetry).
	Delay time.Duration
	// Err is the failure: the reason of a dead letter or termination, logged
	// with a retry (nil for a retry that is no failure: a busy replica).
	Err error
}

// Ack is the outcome of a delivery handled.
func Ack() Outcome { return Outcome{} }

// GiveBack is the outcome of a delivery this replica hands over (stopping).
func GiveBack() Outcome { return Outcome{Verdict: VerdictGiveBack} }

// RetryIn is the outcome of a delivery to come again after d.
func RetryIn(d time.Duration, err error) Outcome {
	return Outcome{Verdict: VerdictRetry, Delay: d, Err: err}
}

// Fail is the outcome of a delivery that failed for good: it is
// dead-lettered and terminated.
func Fail(err error) Outcome { return Outcome{Verdict: VerdictFail, Err: err} }

// Terminate is the outcome of a delivery settled without success whose
// failure was already dealt with: it is terminated, not dead-lettered.
func Terminate(err error) Outcome { return Outcome{Verdict: VerdictTerminate, Err: err} }

// ErrPanic marks the error a handler's panic became (Protect).
var ErrPanic = errors.New("handler panic")

// Settler is the one way a JetStream delivery is settled: Judge turns a
// handler's error into an Outcome (retry with back-off, dead letter once
// redelivery cannot help or the attempts are spent, give back while
// stopping), Settle tells the server. The Router uses it for every message;
// loops that pull themselves (the llm's turn partitions, the asr's jobs,
// persistence's batches, the tts's turns, the room-agent's dispatches) use
// it the same way.
type Settler struct {
	// Consumer names the consumer in dead letters and logs.
	Consumer string
	// DeadLetters stores failed messages; nil: a failed message is only
	// terminated (a service without the right to publish dead letters,
	// which reports the failure to the client instead).
	DeadLetters *DeadLetters
	// MaxDeliver: the attempt that fails for the MaxDeliver-th time fails
	// for good (match the consumer's MaxDeliver); 0: no limit.
	MaxDeliver int
	// Backoff is the delay before a failed attempt is retried; nil:
	// DefaultBackoff.
	Backoff func(attempt uint64) time.Duration
	Log     zerolog.Logger
}

// DefaultBackoff doubles from 100 ms up to 30 s.
func DefaultBackoff(attempt uint64) time.Duration {
	d := 100 * time.Millisecond
	for i := uint64(1); i < attempt && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// Delay is the back-off before retrying after the attempt-th failure.
func (s *Settler) Delay(attempt uint64) time.Duration {
	if s.Backoff != nil {
		return s.Backoff(attempt)
	}
	return DefaultBackoff(attempt)
}

// Judge turns the error of a message's attempt-th handling (its delivery,
// or a count of its own) into an outcome: nil acks; while ctx is stopping,
// an error not marked Permanent gives the message back (the stop likely
// caused it); an error marked Permanent, or any on the last allowed
// attempt, fails it; a RetryAfter retries after its delay; any other error
// after the back-off.
func (s *Settler) Judge(ctx context.Context, err error, attempt uint64) Outcome {
	switch {
	case err == nil:
		return Ack()
	case ctx.Err() != nil && !errors.Is(err, ErrPermanent):
		return GiveBack()
	case errors.Is(err, ErrPermanent) || (s.MaxDeliver > 0 && attempt >= uint64(s.MaxDeliver)):
		return Fail(err)
	}
	var ra *RetryAfter
	if errors.As(err, &ra) {
		return RetryIn(ra.Delay, err)
	}
	return RetryIn(s.Delay(attempt), err)
}

// Settle tells the server the outcome of m. A dead letter that cannot be
// stored leaves the message to be retried after the back-off, so it is
// never lost.
func (s *Settler) Settle(ctx context.Context, m jetstream.Msg, o Outcome) {
	d := DeliveryOf(m)
	lc := s.Log.With().Str("subject", d.Subject).Uint64("seq", d.Sequence).Uint64("delivered", d.NumDelivered)
	if s.Consumer != "" {
		lc = lc.Str("consumer", s.Consumer)
	}
	log := lc.Logger()
	switch o.Verdict {
	case VerdictAck:
		if err := m.Ack(); err != nil {
			log.Warn().Err(err).Msg("ack failed; the message may be redelivered")
		}
	case VerdictGiveBack:
		_ = m.Nak()
	case VerdictRetry:
		if o.Err != nil {
			log.Warn().Err(o.Err).Dur("retry_in", o.Delay).Msg("handling failed; will retry")
		}
		if err := m.NakWithDelay(o.Delay); err != nil {
			log.Warn().Err(err).Msg("nak failed; the message comes again after AckWait")
		}
	case VerdictFail:
		reason := o.Err
		if reason == nil {
			reason = errors.New("failed")
		}
		if s.DeadLetters != nil {
			if err := s.DeadLetter(context.WithoutCancel(ctx), m.Data(), d, reason); err != nil {
				log.Error().Err(err).Msg("dead letter failed; retrying the message")
				_ = m.NakWithDelay(s.Delay(d.NumDelivered))
				return
			}
		} else {
			log.Error().Err(reason).Msg("message given up")
		}
		_ = m.TermWithReason(clip.Bytes(reason.Error(), 200))
	case VerdictTerminate:
		reason := "settled"
		if o.Err != nil {
			reason = clip.Bytes(o.Err.Error(), 200)
		}
		_ = m.TermWithReason(reason)
	}
}

// DeadLetter stores data, delivered as d, in DeadLetters with cause as the
// reason, without settling its message: for a loop that acknowledges a
// batch as a whole (AckAll), the bad envelopes in it dead-lettered one by
// one.
func (s *Settler) DeadLetter(ctx context.Context, data []byte, d Delivery, cause error) error {
	s.Log.Error().Err(cause).Str("consumer", s.Consumer).Str("subject", d.Subject).Uint64("seq", d.Sequence).
		Uint64("delivered", d.NumDelivered).Msg("dead-lettering message")
	if s.DeadLetters == nil {
		return errors.New("bus: no dead-letter store to put a failed message in")
	}
	return s.DeadLetters.Put(ctx, s.Consumer, data, d, cause)
}

// Process handles m with f (a panic becomes a permanent failure), judges
// the error by m's delivery count and settles m.
func (s *Settler) Process(ctx context.Context, m jetstream.Msg, f func() error) Outcome {
	err := Protect(s.Log, f)
	o := s.Judge(ctx, err, DeliveryOf(m).NumDelivered)
	s.Settle(ctx, m, o)
	return o
}

// Protect calls f and turns a panic in it into a permanent error (ErrPanic):
// the message is dead-lettered instead of crashing each replica it would be
// redelivered to. The stack is logged, the error carries the panic's value.
func Protect(log zerolog.Logger, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error().Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).Msg("handler panic")
			err = Permanent(fmt.Errorf("%w: %v", ErrPanic, p))
		}
	}()
	return f()
}

package bus

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Headers of a dead letter.
const (
	HeaderDLQReason   = "Alicia-Dlq-Reason"
	HeaderDLQCode     = "Alicia-Dlq-Code"
	HeaderDLQSubject  = "Alicia-Dlq-Subject"
	HeaderDLQStream   = "Alicia-Dlq-Stream"
	HeaderDLQSequence = "Alicia-Dlq-Sequence"
	HeaderDLQConsumer = "Alicia-Dlq-Consumer"
)

// DeadLetters stores envelopes a consumer gave up on in the DEADLETTER stream,
// the original bytes untouched and the reason in headers.
type DeadLetters struct{ js jetstream.JetStream }

// NewDeadLetters returns a dead-letter writer.
func NewDeadLetters(js jetstream.JetStream) *DeadLetters { return &DeadLetters{js: js} }

// Put dead-letters data for consumer with cause as the reason. It is
// idempotent per (stream, sequence, consumer): a redelivered poison message
// is stored once.
func (q *DeadLetters) Put(ctx context.Context, consumer string, data []byte, d Delivery, cause error) error {
	msg := nats.NewMsg(subjects.DeadLetter(consumer))
	msg.Data = data
	msg.Header.Set(HeaderDLQReason, clip.Bytes(cause.Error(), 1024))
	if code := protocol.Code(cause); code != 0 {
		msg.Header.Set(HeaderDLQCode, strconv.Itoa(int(code)))
	}
	msg.Header.Set(HeaderDLQSubject, d.Subject)
	msg.Header.Set(HeaderDLQStream, d.Stream)
	msg.Header.Set(HeaderDLQSequence, strconv.FormatUint(d.Sequence, 10))
	msg.Header.Set(HeaderDLQConsumer, consumer)
	opts := []jetstream.PublishOpt{}
	if d.Sequence > 0 {
		opts = append(opts, jetstream.WithMsgID(fmt.Sprintf("dlq:%s:%s:%d", consumer, d.Stream, d.Sequence)))
	}
	if _, err := q.js.PublishMsg(ctx, msg, opts...); err != nil {
		return fmt.Errorf("bus: dead letter: %w", err)
	}
	deadLetters().WithLabelValues(consumer).Inc()
	return nil
}

var (
	deadLettersOnce sync.Once
	deadLettersVec  *prometheus.CounterVec
)

// deadLetters counts the envelopes this process dead-lettered, by the
// consumer that gave up on them (a redelivered poison message stored once
// may be counted again: the count is of decisions, the stream holds one).
func deadLetters() *prometheus.CounterVec {
	deadLettersOnce.Do(func() {
		deadLettersVec = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Name: "dead_letters_total",
			Help: "Envelopes this process put in the DEADLETTER stream, by the consumer that gave up on them."}, []string{"consumer"})
		prometheus.DefaultRegisterer.MustRegister(deadLettersVec)
	})
	return deadLettersVec
}

// DeadLetterMetrics registers the dead-letter counter (it is otherwise
// registered at the first dead letter, and absent from /metrics until then).
func DeadLetterMetrics() prometheus.Collector { return deadLetters() }

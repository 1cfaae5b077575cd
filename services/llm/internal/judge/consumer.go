package judge

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/llm/internal/answerend"
)

// ConsumerName is the judge's durable consumer on CONVERSATIONS, shared by
// every llm replica (pkg/natsauth lists it).
const ConsumerName = "llm-judge"

// maxDeliver: tries of one answer; after the last the answer is dropped and
// counted (unavailable), never dead-lettered.
const maxDeliver = 5

// Consumer feeds the ends of answers to a Judge, Concurrency at a time
// (internal/answerend).
type Consumer struct {
	JS    jetstream.JetStream
	Judge *Judge
	// Concurrency bounds the answers judged at once by this replica
	// (ALICIA_JUDGE_CONCURRENCY).
	Concurrency int
	// Timeout bounds one answer's judging: the wait for persistence, the
	// reads and both judge requests (ALICIA_JUDGE_TIMEOUT, twice over).
	Timeout time.Duration
	Log     zerolog.Logger
}

// consumer is c as an answer-end consumer.
func (c *Consumer) consumer() *answerend.Consumer {
	return &answerend.Consumer{JS: c.JS, Name: ConsumerName, Description: "llm: judges answers after they end",
		Handle: func(ctx context.Context, _, id string, seq uint64) error { return c.Judge.Answer(ctx, id, seq) },
		GiveUp: c.Judge.GiveUp, Concurrency: c.Concurrency, Timeout: c.Timeout, MaxDeliver: maxDeliver, Log: c.Log}
}

// Run creates (or updates) the consumer and judges until ctx ends; then it
// pulls no more, hands back what it holds, and the answers being judged are
// cancelled and handed back too (judging is never urgent).
func (c *Consumer) Run(ctx context.Context) error { return c.consumer().Run(ctx) }

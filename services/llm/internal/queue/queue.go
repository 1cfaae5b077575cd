// Package queue is the llm's turn queue: the LLM_TURNS work-queue stream,
// sourced from CONVERSATIONS with a subject transform that hashes each
// conversation into one of P partitions, and one durable pull consumer per
// partition that every replica pulls from in one priority group, pinned:
// the server delivers a partition's turns to one replica at a time (the
// pinned one, until it stops pulling for PinnedTTL or gives the partition
// up), up to InFlight of them unacknowledged. The replica runs the turns of
// different conversations at once and a conversation's turns one after the
// other, in stream order; different partitions spread over the replicas; a
// turn whose replica dies is redelivered after AckWait.
//
// With a Budget (Config.PerUser > 0) at most PerUser turns of one user run
// at once over every replica (leases in LeaseBucket), a partition's window
// is unbounded and a replica holds at most PerUser turns of one user per
// partition, parking the rest (NakWithDelay, nothing held) along with every
// later turn of a conversation that has one parked; at most InFlight turns
// run per partition, a freed slot going to the user running the fewest
// there. Guarantee: a user's queued turns never keep another user's turn
// from being delivered (parked turns due for redelivery come first, one
// pull each), and delay its start by at most one turn's service time per
// partition: when every run slot is taken, it starts at the next one freed,
// unless a user running fewer turns of the partition waits too.
package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Stream is the name of the turn-queue stream.
const Stream = "LLM_TURNS"

// SourceHeader is the header JetStream puts on a sourced message:
// "<stream> <sequence> <filter> <transform> <original subject> [<ident>]".
const SourceHeader = "Nats-Stream-Source"

// TurnTypes are the client envelopes that start a turn.
var TurnTypes = []protocol.MessageType{protocol.TypeUserMessage, protocol.TypeControlVariation}

// Config shapes the stream and its consumers.
type Config struct {
	Partitions int           // P; each conversation lands in one
	AckWait    time.Duration // a turn not heartbeated for this long is redelivered
	MaxDeliver int           // deliveries of one turn before it is given up
	// Storage of the stream (file by default: a queued turn survives a restart).
	Storage  jetstream.StorageType
	Replicas int
	// MaxAge bounds how long an unanswered turn waits.
	MaxAge time.Duration
	// InFlight is how many turns of one partition may run at once (of
	// different conversations; default DefaultInFlight).
	InFlight int
	// PinnedTTL is how long a replica holds a partition after its last
	// pull (default DefaultPinnedTTL); Consumer.FetchWait must be shorter.
	PinnedTTL time.Duration
	// PerUser > 0: a user's turns are budgeted (Budget) and the ones over
	// it parked, so a partition's window is unbounded (MaxAckPending -1)
	// and the server redelivers without limit (MaxDeliver -1): the replica
	// counts a turn's starts (Budget) and gives it up after MaxDeliver of
	// them. InFlight then bounds the turns running per partition.
	PerUser int
}

// Defaults of Config.
const (
	DefaultInFlight  = 16
	DefaultPinnedTTL = 5 * time.Second
)

// PriorityGroup is the one priority group of the partitions' consumers.
const PriorityGroup = "llm"

// ConsumerName is the durable consumer of partition k.
func ConsumerName(k int) string { return ConsumerPrefix + strconv.Itoa(k) }

// ConsumerPrefix begins the name of every partition's consumer.
const ConsumerPrefix = "llm-p"

// ConsumerNames are the durable consumers of p partitions.
func ConsumerNames(p int) []string {
	out := make([]string, p)
	for k := range out {
		out[k] = ConsumerName(k)
	}
	return out
}

// StreamConfig is the LLM_TURNS configuration; start is where sourcing
// begins when the stream is created (nil: the beginning of CONVERSATIONS).
func StreamConfig(c Config, start *time.Time) jetstream.StreamConfig {
	src := &jetstream.StreamSource{Name: bus.StreamConversations, OptStartTime: start}
	for _, t := range TurnTypes {
		src.SubjectTransforms = append(src.SubjectTransforms, jetstream.SubjectTransformConfig{
			Source:      subjects.AllOfType(subjects.OriginClient, t),
			Destination: subjects.TurnTransform(c.Partitions, t),
		})
	}
	replicas := max(c.Replicas, 1)
	return jetstream.StreamConfig{
		Name:        Stream,
		Description: "Turns for the llm service: user messages and variations, partitioned by conversation",
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     c.Storage,
		Replicas:    replicas,
		MaxAge:      c.MaxAge,
		Discard:     jetstream.DiscardOld,
		Sources:     []*jetstream.StreamSource{src},
	}
}

// Queue is the turn queue: the stream and one consumer per partition.
type Queue struct {
	js        jetstream.JetStream
	cfg       Config
	consumers []jetstream.Consumer
}

// Ensure creates LLM_TURNS (sourcing only what arrives from now on, so a
// first start does not answer a whole history again) or updates it (keeping
// where its source started), then the consumer of every partition.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (*Queue, error) {
	if c.Partitions < 1 {
		return nil, fmt.Errorf("queue: %d partitions", c.Partitions)
	}
	if err := ensureStream(ctx, js, c); err != nil {
		return nil, err
	}
	q := &Queue{js: js, cfg: c, consumers: make([]jetstream.Consumer, c.Partitions)}
	for k := range q.consumers {
		if _, err := q.ensureConsumer(ctx, k); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Partitions is P.
func (q *Queue) Partitions() int { return len(q.consumers) }

// Consumer is the consumer of partition k.
func (q *Queue) Consumer(k int) jetstream.Consumer { return q.consumers[k] }

// ensureConsumer creates or updates the consumer of partition k. Its state
// is kept in memory: in a work queue an acknowledged turn is deleted from
// the (file) stream, so a consumer lost with a server restart is recreated
// and delivers exactly the turns not done, and the acks cost no fsync.
func (q *Queue) ensureConsumer(ctx context.Context, k int) (jetstream.Consumer, error) {
	inFlight, ttl, maxDeliver := q.inFlight(), q.cfg.PinnedTTL, q.cfg.MaxDeliver
	if q.cfg.PerUser > 0 {
		inFlight, maxDeliver = -1, -1
	}
	if ttl <= 0 {
		ttl = DefaultPinnedTTL
	}
	cc := jetstream.ConsumerConfig{
		Durable:        ConsumerName(k),
		Description:    "llm turns of partition " + strconv.Itoa(k) + ", on one replica at a time",
		FilterSubject:  subjects.TurnPartition(k),
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        q.cfg.AckWait,
		MaxAckPending:  inFlight,
		MaxDeliver:     maxDeliver,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		Replicas:       max(q.cfg.Replicas, 1),
		MemoryStorage:  true,
		PriorityGroups: []string{PriorityGroup},
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PinnedTTL:      ttl,
	}
	cn, err := q.js.CreateOrUpdateConsumer(ctx, Stream, cc)
	if err != nil {
		return nil, fmt.Errorf("queue: consumer %s: %w", cc.Durable, err)
	}
	q.consumers[k] = cn
	return cn, nil
}

// inFlight is how many turns of a partition run at once.
func (q *Queue) inFlight() int {
	if q.cfg.InFlight <= 0 {
		return DefaultInFlight
	}
	return q.cfg.InFlight
}

// unpin gives partition k up at once, so the next replica that pulls
// holds it (instead of after PinnedTTL).
func (q *Queue) unpin(ctx context.Context, k int) error {
	s, err := q.js.Stream(ctx, Stream)
	if err != nil {
		return err
	}
	return s.UnpinConsumer(ctx, ConsumerName(k), PriorityGroup)
}

func ensureStream(ctx context.Context, js jetstream.JetStream, c Config) error {
	for range 3 {
		s, err := js.Stream(ctx, Stream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			now := time.Now().UTC()
			_, err = js.CreateStream(ctx, StreamConfig(c, &now))
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // another replica created it first: update it
			}
			if err != nil {
				return fmt.Errorf("queue: create %s: %w", Stream, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("queue: %s: %w", Stream, err)
		}
		// The source keeps the start it was created with.
		have, cfg := s.CachedInfo().Config, StreamConfig(c, nil)
		if len(have.Sources) == 1 && len(cfg.Sources) == 1 {
			src := *cfg.Sources[0]
			src.OptStartTime, src.OptStartSeq = have.Sources[0].OptStartTime, have.Sources[0].OptStartSeq
			cfg.Sources = []*jetstream.StreamSource{&src}
		}
		if err := bus.UpdateStreamIfChanged(ctx, js, have, cfg); err != nil {
			return fmt.Errorf("queue: update %s: %w", Stream, err)
		}
		return nil
	}
	return fmt.Errorf("queue: %s: created and deleted concurrently", Stream)
}

// SourceSequence reads the CONVERSATIONS sequence of a sourced message from
// its Nats-Stream-Source header.
func SourceSequence(header string) (uint64, error) {
	fields := strings.Fields(header)
	if len(fields) < 2 || fields[0] != bus.StreamConversations {
		return 0, fmt.Errorf("%w: %s %q", ErrNoSource, SourceHeader, header)
	}
	seq, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("%w: %s %q", ErrNoSource, SourceHeader, header)
	}
	return seq, nil
}

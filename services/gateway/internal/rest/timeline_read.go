package rest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/timeline"
)

// timelineFetch is how many messages one pull of a timeline page asks for:
// an envelope may be up to the stream's largest (2 MiB of audio), and a
// pull's messages are all in memory at once.
const timelineFetch = 16

// timelineReader reads one conversation's envelopes from CONVERSATIONS
// through short-lived consumers filtered on its subjects
// (alicia.conv.{cid}.>, the one filter the gateway may use for it,
// pkg/natsauth), deleted once read. Reads by sequence (bus.Replay) are not
// the gateway's to make.
type timelineReader struct {
	js     jetstream.JetStream
	filter string
}

func newTimelineReader(js jetstream.JetStream, cid string) timelineReader {
	return timelineReader{js: js, filter: subjects.Conversation(cid)}
}

// consumerConfig is a consumer of the conversation's subjects starting at
// after (the envelope at after first, when it is one of the conversation's:
// its time is the next step's gap), or at the conversation's start.
func (r timelineReader) consumerConfig(after uint64) jetstream.ConsumerConfig {
	if after == 0 {
		return jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	}
	return jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after}
}

// read creates a consumer with cfg on the conversation's subjects and calls
// fn with its messages in stream order, at most want of them, until fn
// returns false or the consumer has no more; then deletes the consumer.
func (r timelineReader) read(ctx context.Context, cfg jetstream.ConsumerConfig, want int, fn func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	cfg.Name = "gateway_timeline_" + nuid.Next()
	cfg.FilterSubject = r.filter
	cfg.AckPolicy = jetstream.AckNonePolicy
	cfg.MemoryStorage, cfg.Replicas = true, 1
	cfg.InactiveThreshold = 30 * time.Second // should the delete below be lost
	cons, err := r.js.CreateConsumer(ctx, bus.StreamConversations, cfg)
	if err != nil {
		return fmt.Errorf("timeline: consumer: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = r.js.DeleteConsumer(dctx, bus.StreamConversations, cfg.Name)
	}()
	for got := 0; got < want; {
		batch, err := cons.FetchNoWait(min(timelineFetch, want-got))
		if err != nil {
			return fmt.Errorf("timeline: fetch: %w", err)
		}
		var last *jetstream.MsgMetadata
		more := true
		for m := range batch.Messages() {
			if !more {
				continue // the rest of the pull, unused
			}
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("timeline: %w", err)
			}
			got++
			last = md
			more = fn(m, md)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("timeline: fetch: %w", err)
		}
		if !more || last == nil || last.NumPending == 0 {
			return ctx.Err()
		}
	}
	return nil
}

// edge is the stream position and time of the conversation's first
// (jetstream.DeliverAllPolicy) or last (DeliverLastPolicy) envelope; nil
// when it has none. Only the headers are read: no audio goes over the wire.
func (r timelineReader) edge(ctx context.Context, policy jetstream.DeliverPolicy) (*jetstream.MsgMetadata, error) {
	var md *jetstream.MsgMetadata
	err := r.read(ctx, jetstream.ConsumerConfig{DeliverPolicy: policy, HeadersOnly: true}, 1,
		func(_ jetstream.Msg, m *jetstream.MsgMetadata) bool { md = m; return false })
	return md, err
}

// first is the time of the conversation's first envelope, when a read
// starts after it (zero at the start: the first step read sets it).
func (r timelineReader) first(ctx context.Context, after uint64) (time.Time, error) {
	if after == 0 {
		return time.Time{}, nil
	}
	md, err := r.edge(ctx, jetstream.DeliverAllPolicy)
	if err != nil || md == nil {
		return time.Time{}, err
	}
	return md.Timestamp, nil
}

// page calls fn with the steps of the envelopes after after, at most
// limit, and reports whether the conversation has more.
func (r timelineReader) page(ctx context.Context, after uint64, limit int, first time.Time, fn func(timeline.Step)) (more bool, err error) {
	var tl timeline.Timeline
	tl.Anchor(first, time.Time{})
	n, want := 0, limit
	if after > 0 {
		want++ // the envelope at after, when it is the conversation's
	}
	err = r.read(ctx, r.consumerConfig(after), want, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		if md.Sequence.Stream == after {
			tl.Anchor(first, md.Timestamp)
			return true
		}
		fn(tl.Step(md.Sequence.Stream, m.Subject(), md.Timestamp, m.Data()))
		n++
		more = md.NumPending > 0
		return n < limit
	})
	return more, err
}

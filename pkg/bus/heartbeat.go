package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Heartbeat keeps m from being redelivered to another consumer while this
// one works on it, however long that takes: it tells the server the work
// is in progress every third of ackWait (the consumer's AckWait; 0 means
// the server's default, 30 s) until ctx ends.
func Heartbeat(ctx context.Context, m jetstream.Msg, ackWait time.Duration) {
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	tk := time.NewTicker(max(ackWait/3, 100*time.Millisecond))
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			_ = m.InProgress()
		}
	}
}

// OrderedHeartbeat is how often the server tells an idle ordered consumer
// that follows a stream live it is alive. An ordered consumer is one
// server's (R1, in memory): when that server goes, nothing tells the
// client, and nats.go recreates the consumer (from the next sequence,
// nothing skipped or repeated) only after two missed heartbeats. With
// nats.go's default (5 s) what the consumer delivers stalled ~10 s after a
// NATS server loss; with this, ~2 s. An idle consumer costs one small
// message a second.
const OrderedHeartbeat = time.Second

// FollowOpts are the Consume options of an ordered consumer that follows a
// stream live (OrderedHeartbeat); extra are added after.
func FollowOpts(extra ...jetstream.PullConsumeOpt) []jetstream.PullConsumeOpt {
	return append([]jetstream.PullConsumeOpt{jetstream.PullHeartbeat(OrderedHeartbeat)}, extra...)
}

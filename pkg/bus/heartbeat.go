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

// PullHeartbeat is how often the server tells a waiting pull that it is
// alive, for every consumer that waits on pulls. A pull request lives on
// one server: an ordered consumer's only server, or the leader of a
// durable's. When that server goes, nothing may tell the client (a
// durable's new leader does not always know the requests the old one
// held), and nats.go notices only after two missed heartbeats, then pulls
// again (an ordered consumer is recreated from its next sequence, nothing
// skipped or repeated). With nats.go's defaults (5 s for ordered consumers
// and fetches, 15 s for a durable's Consume) a conversation's answers, a
// partition's turns or persistence's apply stalled 10–30 s after a NATS
// server loss; with this, about 2 s. An idle pull costs one small message
// a second.
const PullHeartbeat = time.Second

// FollowOpts are the Consume options of a consumer that waits on the
// stream live (PullHeartbeat); extra are added after.
func FollowOpts(extra ...jetstream.PullConsumeOpt) []jetstream.PullConsumeOpt {
	return append([]jetstream.PullConsumeOpt{jetstream.PullHeartbeat(PullHeartbeat)}, extra...)
}

// NextOpts are the options of a Next that waits at most wait: the server
// ends the pull (FetchMaxWait), not the client, with PullHeartbeat when the
// wait leaves room for it (nats.go wants the pull to last at least two
// beats; a shorter one loses no more than its own wait).
//
// Never FetchContext on a consumer that acknowledges: a pull the client
// gives up (its context ended) lives on in the server until it expires, and
// a message the server delivers to it meanwhile — just delivered, or given
// back (Nak) by another task of the same client — reaches nobody and waits
// AckWait before it is delivered again. With the server ending the pull,
// a delivered message always comes before the pull's end.
func NextOpts(wait time.Duration) []jetstream.FetchOpt {
	opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(wait)}
	if wait >= 3*PullHeartbeat {
		opts = append(opts, jetstream.FetchHeartbeat(PullHeartbeat))
	}
	return opts
}

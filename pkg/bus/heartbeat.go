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

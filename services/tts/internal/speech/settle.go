package speech

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
)

// settle tells the server the outcome of a StartAnswer (bus.Settler): a
// turn that cannot be read is terminated (the tts publishes no dead
// letters), one the replica cannot take now comes again after a delay.
func settle(ctx context.Context, log zerolog.Logger, m jetstream.Msg, o bus.Outcome) {
	(&bus.Settler{Log: log}).Settle(ctx, m, o)
}

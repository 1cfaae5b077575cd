package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// waitQuiet waits until every JetStream consumer of the stack has nothing
// pending or unacknowledged: work a seed left behind (memory extraction of
// each seeded turn, say) would otherwise run during a measurement.
func waitQuiet(tb testing.TB, s *stack, timeout time.Duration) {
	tb.Helper()
	nc, err := nats.Connect(s.gateway.cfg.NATSURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	testkit.EventuallyNoError(tb, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var busy []string
		streams := js.ListStreams(ctx)
		for st := range streams.Info() {
			stream, err := js.Stream(ctx, st.Config.Name)
			if err != nil {
				return err
			}
			cons := stream.ListConsumers(ctx)
			for ci := range cons.Info() {
				if n := ci.NumPending + uint64(ci.NumAckPending); n > 0 {
					busy = append(busy, fmt.Sprintf("%s/%s %d", st.Config.Name, ci.Name, n))
				}
			}
			if err := cons.Err(); err != nil {
				return err
			}
		}
		if err := streams.Err(); err != nil {
			return err
		}
		if len(busy) > 0 {
			return fmt.Errorf("consumers with work left: %s", strings.Join(busy, ", "))
		}
		return nil
	}, "the stack quiet")
	tb.Logf("stack quiet after %s", time.Since(start).Round(time.Millisecond))
}

package queue_test

import (
	"testing"

	"go.uber.org/goleak"
)

// nats-server's wait for a source consumer's creation (up to 30 s,
// srcConsumerWaitTime) does not end when its server shuts down: a server
// shut down while a stream of it was setting up its source (the cluster
// tests lose servers on purpose) leaves it behind for a while.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
}

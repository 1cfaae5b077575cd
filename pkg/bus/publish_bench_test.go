package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsserver"
)

// BenchmarkPublishDurability measures the cost of fsync on every write
// (our setting) against NATS's default two-minute fsync, publishing
// 150-byte envelopes with 64 in flight (async publish, acks awaited).
func BenchmarkPublishDurability(b *testing.B) {
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"sync_always", 0}, {"sync_every_2m", 2 * time.Minute}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := natsserver.Start(natsserver.Options{URL: "nats://127.0.0.1:0", StoreDir: b.TempDir(), SyncInterval: c.interval})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { s.Shutdown(); s.WaitForShutdown() }()
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(64))
			if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 150)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := js.PublishAsync(fmt.Sprintf("alicia.conv.ac_%d.server.assistant_sentence", i%100), payload); err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "envelopes/s")
		})
	}
}

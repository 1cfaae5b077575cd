package backlog_test

import (
	"testing"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// BenchmarkRefuse is what the check costs an envelope at the edge: a
// lock-free read of the last estimate, from every core at once.
func BenchmarkRefuse(b *testing.B) {
	js := natstest.JetStream(b, natstest.Connect(b, natstest.Run(b)))
	if err := bus.EnsureStreams(b.Context(), js, bus.StreamsConfig{}); err != nil {
		b.Fatal(err)
	}
	w, err := backlog.Watch(b.Context(), js, backlog.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, refuse := w.Refuse(); refuse {
				b.Fatal("refusing on an empty stream")
			}
		}
	})
}

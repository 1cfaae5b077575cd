package asr_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// whisperTime is what the fake Whisper takes per job in BenchmarkASRScaling.
const whisperTime = 200 * time.Millisecond

// BenchmarkASRScaling measures how throughput grows with replicas: k
// replicas of one job at a time each, a fake Whisper taking 200 ms per job,
// a queue of final jobs (each a Transcription and a UserMessage stored with
// fsync). The ideal is k × 5 jobs/s; "ratio" is the measured share of it.
//
//	go test -run '^$' -bench ASRScaling -benchtime 3x ./services/asr/
func BenchmarkASRScaling(b *testing.B) {
	for _, k := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("replicas=%d", k), func(b *testing.B) { benchScaling(b, k) })
	}
}

func benchScaling(b *testing.B, k int) {
	h := newHarness(b)
	fake := fakeopenai.New(b)
	fake.SetTranscriptionFault(fakeopenai.Fault{Latency: whisperTime})
	for range k {
		cfg := h.config(fake)
		cfg.Concurrency = 1
		h.replica(cfg)
	}
	testkit.Eventually(b, 5*time.Second, func() bool { return h.waiting() == k }, "replicas pulling")

	var done atomic.Int64
	var target atomic.Int64
	reached := make(chan struct{}, 1)
	sub, err := h.nc.Subscribe(allUserMessages, func(*nats.Msg) {
		if done.Add(1) == target.Load() {
			reached <- struct{}{}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	perBatch := 10 * k
	batches := 0
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		batch := make([]*protocol.ASRJob, perBatch)
		for i := range batch {
			batch[i] = newUtterance(protocol.NewID("ac")).job(true, time.Second)
		}
		batches++
		target.Add(int64(perBatch))
		b.StartTimer()
		start := time.Now()
		for _, j := range batch {
			h.publish(j)
		}
		select {
		case <-reached:
		case <-time.After(time.Duration(perBatch) * whisperTime * 3):
			b.Fatalf("batch not done: %d of %d user messages", done.Load(), target.Load())
		}
		elapsed += time.Since(start)
	}
	n := batches * perBatch
	perSec := float64(n) / elapsed.Seconds()
	ideal := float64(k) / whisperTime.Seconds()
	b.ReportMetric(perSec, "jobs/s")
	b.ReportMetric(perSec/ideal, "ratio")
	b.ReportMetric(0, "ns/op")
}

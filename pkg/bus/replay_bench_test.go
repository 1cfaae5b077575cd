package bus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
)

const (
	benchPerConv = 200
	// benchActive conversations run at the same time, so each conversation's
	// envelopes interleave with 99 others over a window of the stream, as
	// they do on a live server.
	benchActive = 100
)

var benchTypes = []string{"user_message", "start_answer", "assistant_sentence", "assistant_sentence", "assistant_sentence", "tool_use_request", "tool_use_result", "memory_trace", "reasoning_step", "transcription"}

// replayDataset starts a JetStream server on a cached store holding
// 1,000,000 envelopes over 5,000 conversations, 100 of them active at a time
// (built once; ~150 MB).
func replayDataset(b *testing.B, benchConvs int) (*nats.Conn, jetstream.JetStream) {
	dir := os.Getenv("ALICIA_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "alicia-bench")
	}
	store := filepath.Join(dir, fmt.Sprintf("replay-%dconv-active100", benchConvs))
	ready := filepath.Join(store, "READY")
	_, err := os.Stat(ready)
	fresh := err != nil
	if fresh {
		_ = os.RemoveAll(store)
	}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: store, NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats not ready")
	}
	b.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		b.Fatal(err)
	}
	if fresh {
		payload := make([]byte, 120)
		start := time.Now()
		for i := 0; i < benchConvs*benchPerConv; i++ {
			window, k, c := i/(benchActive*benchPerConv), (i/benchActive)%benchPerConv, i%benchActive
			cid := fmt.Sprintf("ac_%06d", window*benchActive+c)
			typ := benchTypes[k%len(benchTypes)]
			side := "server"
			if typ == "user_message" {
				side = "client"
			}
			if _, err := js.PublishAsync("alicia.conv."+cid+"."+side+"."+typ, payload); err != nil {
				b.Fatal(err)
			}
			if i%5000 == 4999 {
				<-js.PublishAsyncComplete()
			}
		}
		<-js.PublishAsyncComplete()
		b.Logf("built %d-envelope stream in %s", benchConvs*benchPerConv, time.Since(start))
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return nc, js
}

func reportLatency(b *testing.B, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkReplayConversation reads one conversation's 200 envelopes with
// bus.Replay (batched direct get) out of streams of 100,000 and 1,000,000
// envelopes: the cost must stay with the conversation.
func BenchmarkReplayConversation(b *testing.B) {
	for _, convs := range []int{500, 5000} {
		b.Run(fmt.Sprintf("stream=%d", convs*benchPerConv), func(b *testing.B) {
			nc, _ := replayDataset(b, convs)
			ctx := context.Background()
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cid := fmt.Sprintf("ac_%06d", (i*7919)%convs)
				n := 0
				t0 := time.Now()
				err := bus.Replay(ctx, nc, bus.StreamConversations, "alicia.conv."+cid+".>", 0, func(bus.Stored) error { n++; return nil })
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if n != benchPerConv {
					b.Fatalf("replayed %d envelopes, want %d", n, benchPerConv)
				}
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkReplayOrderedConsumer is the baseline: a filtered ordered consumer
// on the 1,000,000-envelope stream.
func BenchmarkReplayOrderedConsumer(b *testing.B) {
	const convs = 5000
	_, js := replayDataset(b, convs)
	ctx := context.Background()
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cid := fmt.Sprintf("ac_%06d", (i*7919)%convs)
		t0 := time.Now()
		c, err := js.OrderedConsumer(ctx, bus.StreamConversations, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"alicia.conv." + cid + ".>"}})
		if err != nil {
			b.Fatal(err)
		}
		batch, err := c.Fetch(benchPerConv, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		lat = append(lat, time.Since(t0))
		if n != benchPerConv {
			b.Fatalf("consumer delivered %d envelopes, want %d", n, benchPerConv)
		}
	}
	reportLatency(b, lat)
}

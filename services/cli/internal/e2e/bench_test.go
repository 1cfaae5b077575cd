package e2e_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway"
)

// turnLatency sends one UserMessage and returns the time until the first
// AssistantSentence of its answer arrives on the WebSocket; it then reads
// the rest of the answer. Any error fails the benchmark.
func (c *client) turnLatency() time.Duration {
	c.t.Helper()
	d, err := c.soakTurn("Hello there, how are you?")
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

// manyConnections lets one user hold n WebSockets, each sending up to an
// envelope a second on average (the benchmarks' clients are all alice).
func manyConnections(n int) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.Quotas.ConnectionsPerUser = n
		c.Quotas.Edge.UserRate, c.Quotas.Edge.UserBurst = float64(n), float64(2*n)
	}
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "turns")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTextTurnOverhead: UserMessage sent on the WebSocket → first
// AssistantSentence received, the fake model answering at once. The whole
// path is real: gateway, JetStream (fsync on every write), the llm's turn
// queue, history.get, memory.search (embeddings + pgvector), persistence.
func BenchmarkTextTurnOverhead(b *testing.B) {
	s := newStack(b, options{})
	c := s.open(b, aliceKey, "", 0)
	for range 20 { // warm up connections, caches and the turn consumers
		c.turnLatency()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, c.turnLatency())
	}
	b.StopTimer()
	report(b, lat)
}

// BenchmarkTextTurnOverhead200: 200 conversations, each sending a message
// every 2 s (random phase), for 20 s; the latency of every turn.
func BenchmarkTextTurnOverhead200(b *testing.B) {
	const conversations, every, run = 200, 2 * time.Second, 20 * time.Second
	s := newStack(b, options{gateway: manyConnections(conversations)})
	clients := make([]*client, conversations)
	for i := range clients {
		clients[i] = s.open(b, aliceKey, "", 0)
	}
	for _, c := range clients[:10] {
		c.turnLatency()
	}
	b.ResetTimer()
	for range b.N {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		end := time.Now().Add(run)
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := time.Now().Add(time.Duration(rand.Int64N(int64(every))))
				for {
					time.Sleep(time.Until(next)) // the load's pacing, not a wait for a condition
					if time.Now().After(end) {
						return
					}
					d := c.turnLatency()
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					next = next.Add(every)
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		report(b, lat)
		b.StartTimer()
	}
}

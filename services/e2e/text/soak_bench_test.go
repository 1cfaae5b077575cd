package text_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// soakTurn sends text as a UserMessage and returns the time until the
// first AssistantSentence of its answer arrives, having read the rest of
// the answer. An ErrorMessage, a broken connection or an answer that does
// not come within 30 s is an error (the soak counts it and goes on).
func (c *client) soakTurn(text string) (time.Duration, error) {
	t0 := time.Now()
	id := protocol.NewID("am")
	b, err := protocol.Encode(protocol.Envelope{StanzaID: c.next, ConversationID: c.cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: id, ConversationID: c.cid, Content: text, Timestamp: protocol.Ptr(time.Now().UnixMilli())}})
	if err != nil {
		return 0, err
	}
	c.next++
	if err := c.c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		return 0, err
	}
	var start string
	var first time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for {
		env, err := c.recv(time.Until(deadline))
		if err != nil {
			return 0, err
		}
		switch b := env.Body.(type) {
		case *protocol.StartAnswer:
			if b.PreviousID == id {
				start = b.ID
			}
		case *protocol.AssistantSentence:
			if start != "" && b.PreviousID == start {
				if first == 0 {
					first = time.Since(t0)
				}
				if b.IsFinal != nil && *b.IsFinal {
					return first, nil
				}
			}
		case *protocol.ErrorMessage:
			return 0, fmt.Errorf("ErrorMessage %d: %s", b.Code, b.Message)
		}
	}
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// soakSample is the state of the process (every service runs in it) at one
// moment, and the turns of the window before it.
type soakSample struct {
	at           time.Duration
	heapKiB      float64
	goroutines   int
	turns, errs  int
	p50ms, p99ms float64
}

func quantileMS(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

// slopePerMin is the least-squares slope of ys over the samples' times, per minute.
func slopePerMin(ss []soakSample, y func(soakSample) float64) float64 {
	n := float64(len(ss))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for _, s := range ss {
		mx += s.at.Minutes()
		my += y(s)
	}
	mx, my = mx/n, my/n
	var num, den float64
	for _, s := range ss {
		num += (s.at.Minutes() - mx) * (y(s) - my)
		den += (s.at.Minutes() - mx) * (s.at.Minutes() - mx)
	}
	return num / den
}

// BenchmarkSoak holds ALICIA_SOAK_CONVERSATIONS (200) text conversations
// through the whole stack for ALICIA_SOAK_DURATION (10m), each sending a
// message every 2 s at a random phase, the fake model answering at once.
// Every ALICIA_SOAK_SAMPLE (30s) it samples the process — every service
// runs in it — after a GC: live heap, goroutines, and the window's turn
// overhead (UserMessage sent → first sentence received) and errors. It
// reports the errors, heap and goroutines at start and end with their
// slope, and p50/p99 over time (logged per window).
//
//	ALICIA_SOAK_DURATION=10m go test -run '^$' -bench Soak -benchtime 1x -timeout 30m ./services/e2e/text/
func BenchmarkSoak(b *testing.B) {
	conversations := envInt("ALICIA_SOAK_CONVERSATIONS", 200)
	run := envDuration("ALICIA_SOAK_DURATION", 10*time.Minute)
	every := 2 * time.Second
	sampleEvery := envDuration("ALICIA_SOAK_SAMPLE", 30*time.Second)
	s := newStack(b, options{gateway: manyConnections(conversations), unrecorded: true})
	clients := make([]*client, conversations)
	for i := range clients {
		clients[i] = s.open(b, aliceKey, "", 0)
	}
	for _, c := range clients[:10] {
		c.turnLatency()
	}
	sample := func(at time.Duration) soakSample {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return soakSample{at: at, heapKiB: float64(m.HeapAlloc) / 1024, goroutines: runtime.NumGoroutine()}
	}
	b.ResetTimer()
	for range b.N {
		var (
			mu      sync.Mutex
			window  []time.Duration
			werrs   int
			errs    atomic.Int64
			turns   atomic.Int64
			lastErr error
		)
		t0 := time.Now()
		end := t0.Add(run)
		samples := []soakSample{sample(0)}
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := time.Now().Add(time.Duration(rand.Int64N(int64(every))))
				for n := 0; ; n++ {
					time.Sleep(time.Until(next)) // the load's pacing
					if time.Now().After(end) {
						return
					}
					d, err := c.soakTurn(fmt.Sprintf("Soak %d message %d: how are you?", i, n))
					turns.Add(1)
					mu.Lock()
					if err != nil {
						errs.Add(1)
						werrs++
						lastErr = err
					} else {
						window = append(window, d)
					}
					mu.Unlock()
					next = next.Add(every)
				}
			}()
		}
		tick := time.NewTicker(sampleEvery)
		for now := range tick.C {
			mu.Lock()
			w, we := window, werrs
			window, werrs = nil, 0
			mu.Unlock()
			sm := sample(now.Sub(t0))
			sm.turns, sm.errs, sm.p50ms, sm.p99ms = len(w), we, quantileMS(w, 0.5), quantileMS(w, 0.99)
			samples = append(samples, sm)
			// On stderr as they come: a benchmark's log keeps only its first lines.
			fmt.Fprintf(os.Stderr, "soak %6s  heap %8.0f KiB  goroutines %5d  turns %5d  errors %d  p50 %6.2f ms  p99 %6.2f ms\n",
				sm.at.Round(time.Second), sm.heapKiB, sm.goroutines, sm.turns, sm.errs, sm.p50ms, sm.p99ms)
			if now.After(end) {
				break
			}
		}
		tick.Stop()
		wg.Wait()
		b.StopTimer()
		if lastErr != nil {
			b.Logf("last error: %v", lastErr)
		}
		// The slope leaves out the first window (caches, pools and
		// consumers warming up).
		steady := samples[min(2, len(samples)-1):]
		first, last := samples[0], samples[len(samples)-1]
		var p50s, p99s []float64
		for _, sm := range samples[1:] {
			p50s = append(p50s, sm.p50ms)
			p99s = append(p99s, sm.p99ms)
		}
		slices.Sort(p50s)
		slices.Sort(p99s)
		b.ReportMetric(float64(errs.Load()), "errors")
		b.ReportMetric(float64(turns.Load()), "turns")
		b.ReportMetric(first.heapKiB, "heap-start-KiB")
		b.ReportMetric(last.heapKiB, "heap-end-KiB")
		b.ReportMetric(slopePerMin(steady, func(s soakSample) float64 { return s.heapKiB }), "heap-slope-KiB/min")
		b.ReportMetric(float64(first.goroutines), "goroutines-start")
		b.ReportMetric(float64(last.goroutines), "goroutines-end")
		b.ReportMetric(slopePerMin(steady, func(s soakSample) float64 { return float64(s.goroutines) }), "goroutines-slope/min")
		if len(p50s) > 0 {
			b.ReportMetric(p50s[len(p50s)/2], "window-p50-median-ms")
			b.ReportMetric(p99s[len(p99s)-1], "window-p99-worst-ms")
		}
		b.ReportMetric(0, "ns/op")
		b.StartTimer()
	}
}

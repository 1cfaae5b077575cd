package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/llm/internal/queue"
)

// BenchmarkFairTurns: 20 ordinary users, one conversation each, send a
// message every 200 ms; every turn takes 50 ms (the model). The figure is
// an ordinary user's wait from publishing to the turn starting (what the
// queue adds to the first sentence), p50/p99, without and with one user
// flooding 4 partitions from 64 conversations × 10 messages sent at once,
// with the budget (PerUser 4) and without it (the queue before it).
func BenchmarkFairTurns(b *testing.B) {
	for _, c := range []struct {
		name    string
		flood   bool
		perUser int
	}{{"idle/budget=on", false, 4}, {"flood/budget=on", true, 4}, {"idle/budget=off", false, 0}, {"flood/budget=off", true, 0}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			cfg := queue.Config{Partitions: 4, AckWait: 10 * time.Second, MaxDeliver: 5, InFlight: 16, PerUser: c.perUser}
			var mu sync.Mutex
			sent := map[string]time.Time{}
			var waits []time.Duration
			started := make(chan struct{}, 1<<16) // one per ordinary turn started
			e.budgetReplica(b, cfg, func(ctx context.Context, tu queue.Turn) error {
				if tu.User != "flood" {
					mu.Lock()
					waits = append(waits, time.Since(sent[tu.ConversationID+fmt.Sprint(tu.Env.StanzaID)]))
					mu.Unlock()
					started <- struct{}{}
				}
				select {
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
				}
				return nil
			}, nil)
			if c.flood {
				for m := range 10 {
					for i := range 64 {
						cid := fmt.Sprintf("ac_flood%d", i)
						e.sayAs(b, "flood", cid, fmt.Sprintf("am_f%d_%d", i, m), int32(m+1))
					}
				}
			}
			rounds := 0
			pace := time.NewTicker(200 * time.Millisecond) // the users' pace, not a wait for a condition
			defer pace.Stop()
			for b.Loop() {
				rounds++
				for u := range 20 {
					cid := fmt.Sprintf("ac_user%d", u)
					mu.Lock()
					sent[cid+fmt.Sprint(rounds)] = time.Now()
					mu.Unlock()
					e.sayAs(b, fmt.Sprintf("user%d", u), cid, fmt.Sprintf("am_u%d_%d", u, rounds), int32(rounds))
				}
				<-pace.C
			}
			deadline := time.NewTimer(60 * time.Second)
			defer deadline.Stop()
		wait:
			for n := 0; n < rounds*20; n++ {
				select {
				case <-started:
				case <-deadline.C:
					break wait
				}
			}
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(waits)
			if len(waits) < rounds*20 {
				b.Logf("%d of %d turns started within 60 s", len(waits), rounds*20)
				waits = append(waits, 60*time.Second) // the rest: longer than the bench waited
			}
			pct := func(q float64) float64 { return float64(waits[int(q*float64(len(waits)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

package llm_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm/internal/timers"
)

// BenchmarkTimerDelivery is issue 30's timer figure: a timer's due time →
// its message's StartAnswer stored on CONVERSATIONS (seen by a recorder),
// p50 and max over timersPerPhase timers per phase:
//   - live: one llm replica running, half the timers in a conversation
//     with a call open (a room-agent answers voice_room: text+voice);
//   - across a restart: the timers scheduled, the replica stopped and a new
//     one started before they are due;
//   - due while down: no replica when they are due; the figure is the new
//     replica's start (llm.Run called) → the message.
//
// go test -run '^$' -bench TimerDelivery -benchtime 1x ./services/llm/
func BenchmarkTimerDelivery(b *testing.B) {
	const timersPerPhase = 20
	for b.Loop() {
		h := newHarness(b)
		cfg := h.config(h.fake)
		stop := h.replica(cfg)
		spoken, written := h.conversation(), h.conversation()
		unserve, err := rpc.ServeVoiceRoom(h.nc, spoken, func() int { return 1 })
		if err != nil {
			b.Fatal(err)
		}
		defer unserve()
		ws := map[string]*watcher{spoken: h.watch(spoken), written: h.watch(written)}
		// Both conversations exist in Postgres before any timer is due.
		testkit.Eventually(b, 10*time.Second, func() bool {
			var n int
			_ = h.pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_conversations WHERE id = ANY($1)`, []string{spoken, written}).Scan(&n)
			return n == 2
		}, "conversations stored")

		schedule := func(phase string, first time.Time) map[string]time.Time {
			due := map[string]time.Time{}
			for i := range timersPerPhase {
				cid := written
				if i%2 == 0 {
					cid = spoken
				}
				at := first.Add(time.Duration(i) * 50 * time.Millisecond)
				id := protocol.DeriveID("atm", phase, i)
				t := &protocol.Timer{ID: id, UserID: testUser, ConversationID: cid, Kind: protocol.TimerKindTimer, DueAt: at.UnixMilli(),
					Status: protocol.TimerStatusScheduled, CreatedAt: time.Now().UnixMilli(), Timestamp: time.Now().UnixMilli()}
				if _, err := h.pub.PublishSystem(context.Background(), protocol.New("", t), "timer:"+id+":scheduled"); err != nil {
					b.Fatal(err)
				}
				due[id] = time.UnixMilli(at.UnixMilli())
			}
			return due
		}
		// delivered waits for every timer's StartAnswer and returns when each was seen.
		delivered := func(due map[string]time.Time) map[string]time.Time {
			seenAt := map[string]time.Time{}
			testkit.Eventually(b, 60*time.Second, func() bool {
				for _, w := range ws {
					for _, s := range w.all() {
						if sa, ok := s.Env.Body.(*protocol.StartAnswer); ok {
							for id := range due {
								if sa.ID == timers.MessageID(id) {
									if _, ok := seenAt[id]; !ok {
										seenAt[id] = s.At
									}
								}
							}
						}
					}
				}
				return len(seenAt) == len(due)
			}, "timers delivered")
			return seenAt
		}
		report := func(name string, from func(id string) time.Time, due map[string]time.Time) {
			got := delivered(due)
			var ms []float64
			for id, at := range got {
				ms = append(ms, float64(at.Sub(from(id)).Microseconds())/1000)
			}
			slices.Sort(ms)
			p50, mx := ms[len(ms)/2], ms[len(ms)-1]
			b.ReportMetric(p50, name+"_p50_ms")
			b.ReportMetric(mx, name+"_max_ms")
			fmt.Printf("timer delivery %-15s p50 %7.1f ms  max %7.1f ms  (%d timers)\n", name, p50, mx, len(ms))
		}

		due := schedule("live", time.Now().Add(2*time.Second))
		report("live", func(id string) time.Time { return due[id] }, due)

		restartDue := schedule("restart", time.Now().Add(4*time.Second))
		stop()
		stop = h.replica(cfg)
		report("across_restart", func(id string) time.Time { return restartDue[id] }, restartDue)

		stop()
		downDue := schedule("down", time.Now().Add(500*time.Millisecond))
		last := downDue[protocol.DeriveID("atm", "down", timersPerPhase-1)]
		testkit.Eventually(b, 10*time.Second, func() bool { return time.Now().After(last) }, "due while down")
		started := time.Now()
		stop = h.replica(cfg)
		report("due_while_down", func(string) time.Time { return started }, downDue)
		stop()
	}
}

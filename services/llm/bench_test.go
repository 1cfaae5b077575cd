package llm_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm"
)

// sentenceClock timestamps every AssistantSentence as it is published.
type sentenceClock struct {
	mu      sync.Mutex
	waiters map[string]chan stamped // by conversation
}

type stamped struct {
	at    time.Time
	final bool
}

func newSentenceClock(b *testing.B, nc *nats.Conn) *sentenceClock {
	c := &sentenceClock{waiters: map[string]chan stamped{}}
	sub, err := nc.Subscribe(subjects.AllOfType(subjects.OriginServer, protocol.TypeAssistantSentence), func(m *nats.Msg) {
		at := time.Now()
		env, err := protocol.Decode(m.Data)
		if err != nil {
			return
		}
		s := env.Body.(*protocol.AssistantSentence)
		c.mu.Lock()
		ch := c.waiters[env.ConversationID]
		c.mu.Unlock()
		if ch != nil {
			ch <- stamped{at: at, final: s.IsFinal != nil && *s.IsFinal}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

func (c *sentenceClock) follow(cid string) chan stamped {
	ch := make(chan stamped, 64)
	c.mu.Lock()
	c.waiters[cid] = ch
	c.mu.Unlock()
	return ch
}

// turn sends a user message and returns the time to its first sentence,
// after waiting for the answer to end.
func (c *sentenceClock) turn(b *testing.B, h *harness, cid string, ch chan stamped) time.Duration {
	start := time.Now()
	h.say(cid, "Hi, how are you?")
	var first time.Duration
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-ch:
			if first == 0 {
				first = s.at.Sub(start)
			}
			if s.final {
				return first
			}
		case <-timeout:
			b.Fatal("no answer within 10s")
		}
	}
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTurnOverhead measures what the llm adds to a turn: a UserMessage
// published on JetStream → the first AssistantSentence published, with a
// model that answers at once, on a real JetStream server (fsync on every
// write) with persistence applying the stream to Postgres. One conversation,
// one turn at a time (a new conversation every 20 turns, so the history
// stays that of a real conversation).
//
// paced: the next message is sent once persistence has stored the answer,
// as with any human, who needs longer than that to read or hear it.
// back-to-back: sent the instant the final sentence is out, so each turn
// also waits for persistence to store the previous answer (read-your-writes).
//
// budget=on runs with the default ALICIA_LLM_TURNS_PER_USER (a lease taken
// and released per turn), budget=off without it, in the same run.
func BenchmarkTurnOverhead(b *testing.B) {
	for _, c := range []struct {
		paced   bool
		perUser int
	}{{true, llm.DefaultConfig().TurnsPerUser}, {true, 0}, {false, llm.DefaultConfig().TurnsPerUser}, {false, 0}} {
		paced := c.paced
		name := "paced"
		if !paced {
			name = "back-to-back"
		}
		name += "/budget=on"
		if c.perUser == 0 {
			name = strings.Replace(name, "=on", "=off", 1)
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b)
			h.fake.AddScript(fakeopenai.Script{Turns: []fakeopenai.Turn{fakeopenai.Text("Hello! How can I help you today?")}, Repeat: true})
			cfg := h.config(h.fake)
			cfg.TurnsPerUser = c.perUser
			h.replica(cfg)
			clock := newSentenceClock(b, h.nc)
			str, err := h.js.Stream(context.Background(), bus.StreamConversations)
			if err != nil {
				b.Fatal(err)
			}
			var lat []time.Duration
			var cid string
			var ch chan stamped
			for i := 0; b.Loop(); i++ {
				if i%20 == 0 {
					cid = h.conversation()
					ch = clock.follow(cid)
				}
				if paced {
					b.StopTimer()
					info, err := str.Info(context.Background())
					if err == nil {
						err = rpc.WaitApplied(context.Background(), h.nc, bus.StreamConversations, info.State.LastSeq)
					}
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				lat = append(lat, clock.turn(b, h, cid, ch))
			}
			report(b, lat)
		})
	}
}

// BenchmarkTurnOverheadLoad: 200 conversations each sending a message every
// 2 s (100 turns/s) for 20 s; the first-sentence latency of every turn. One
// run of the load whatever b.N is (-benchtime 1x).
func BenchmarkTurnOverheadLoad(b *testing.B) {
	h := newHarness(b)
	h.fake.AddScript(fakeopenai.Script{Turns: []fakeopenai.Turn{fakeopenai.Text("Hello! How can I help you today?")}, Repeat: true})
	cfg := h.config(h.fake)
	cfg.Partitions = llm.DefaultConfig().Partitions
	h.replica(cfg)
	clock := newSentenceClock(b, h.nc)
	const conversations, every, duration = 200, 2 * time.Second, 20 * time.Second
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	b.ResetTimer()
	deadline := time.Now().Add(duration)
	for i := range conversations {
		cid := h.conversation()
		ch := clock.follow(cid)
		wg.Go(func() {
			// Spread the conversations over the period.
			next := time.Now().Add(time.Duration(i) * every / conversations)
			for next.Before(deadline) {
				time.Sleep(time.Until(next))
				d := clock.turn(b, h, cid, ch)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				next = next.Add(every)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(len(lat)), "turns")
	report(b, lat)
}

// BenchmarkStop: a client's ControlStop published (one synced JetStream
// write) → the model's stream for the answer it stops is closed. One stop
// per iteration, in the middle of a streaming answer.
func BenchmarkStop(b *testing.B) {
	h := newHarness(b)
	h.replica(h.config(h.fake))
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		cid, _, _, aid := h.countToTen(b)
		b.StartTimer()
		at := time.Now()
		h.client(cid, &protocol.ControlStop{ConversationID: cid, TargetID: &aid, StopType: protocol.Ptr(protocol.ControlStopStopTypeAll)})
		if err := testkit.CheckFor(time.Second, 100*time.Microsecond, func() error {
			if h.fake.Active() > 0 {
				return errors.New("model request still streaming")
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(at))
	}
	report(b, lat)
}

package llm_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// modelClock sits between the llm and its one model backend and times every
// request until its last byte, streaming what passes through (so the turns'
// first sentences are not held back), telling title requests from turns.
type modelClock struct {
	mu     sync.Mutex
	titles []time.Duration
	turns  []time.Duration
}

func (m *modelClock) serve(b *testing.B, upstream string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		title := bytes.Contains(body, []byte("You name conversations"))
		start := time.Now()
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+strings.TrimPrefix(r.URL.Path, "/v1"), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				break
			}
		}
		took := time.Since(start)
		m.mu.Lock()
		if title {
			m.titles = append(m.titles, took)
		} else {
			m.turns = append(m.turns, took)
		}
		m.mu.Unlock()
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// BenchmarkTitles: what naming conversations costs their first answers and
// the model. Each iteration is a turn, a new conversation every
// titleBenchTurns (8) turns (a title follows the first answer, and a
// revisit the fourth), paced as in BenchmarkJudge (the next once persistence
// stored the last answer, so a title's request overlaps the next turn), with
// titles off and on in one run; one model backend for turns and titles, the
// gpu-box profile (150 ms to the first token, 140 tokens/s). Reported: the
// first sentence's latency (p50/p99 of every turn; p50/max of the first
// answers, the ones a title follows), and with titles on the time of a title
// request and the titles' share of the model's busy time (sum of title
// request times over the sum of all request times).
// titleBenchTurns is the turns of each conversation of BenchmarkTitles.
const titleBenchTurns = 8

func BenchmarkTitles(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "titles=off"
		if on {
			name = "titles=on"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b)
			fake := fakeopenai.New(b, fakeopenai.WithProfile(fakeopenai.GPUBox), fakeopenai.WithResponder(func(r fakeopenai.Request) fakeopenai.Turn {
				if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You name conversations") {
					return fakeopenai.Text("Greetings and small talk")
				}
				return fakeopenai.Text("Hello! How can I help you today?")
			}))
			clock := &modelClock{}
			cfg := h.config(fake)
			cfg.LLMURL = clock.serve(b, fake.URL())
			cfg.Titles = on
			h.replica(cfg)
			sentences := newSentenceClock(b, h.nc)
			str, err := h.js.Stream(b.Context(), bus.StreamConversations)
			if err != nil {
				b.Fatal(err)
			}
			var lat, first []time.Duration
			var cid string
			var ch chan stamped
			conversations := 0
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				if i%titleBenchTurns == 0 {
					cid = h.conversation()
					ch = sentences.follow(cid)
					conversations++
				}
				info, err := str.Info(b.Context())
				if err == nil {
					err = rpc.WaitApplied(b.Context(), h.nc, bus.StreamConversations, info.State.LastSeq)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				d := sentences.turn(b, h, cid, ch)
				lat = append(lat, d)
				if i%titleBenchTurns == 0 {
					first = append(first, d)
				}
			}
			b.StopTimer()
			if on {
				testkit.Eventually(b, 60*time.Second, func() bool {
					clock.mu.Lock()
					defer clock.mu.Unlock()
					return len(clock.titles) >= conversations
				}, "every conversation titled")
				clock.mu.Lock()
				titles, all := slices.Clone(clock.titles), append(slices.Clone(clock.titles), clock.turns...)
				clock.mu.Unlock()
				var sumTitles, sumAll time.Duration
				for _, d := range titles {
					sumTitles += d
				}
				for _, d := range all {
					sumAll += d
				}
				slices.Sort(titles)
				b.ReportMetric(float64(titles[len(titles)/2].Microseconds())/1000, "title-p50-ms")
				b.ReportMetric(100*float64(sumTitles)/float64(sumAll), "title-share-%")
			}
			slices.Sort(first)
			b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "first-p50-ms")
			b.ReportMetric(float64(first[len(first)-1].Microseconds())/1000, "first-max-ms")
			report(b, lat)
		})
	}
}

package llm_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
)

// judgeMeter sits between the judge and its model: it times each request
// and reads the tokens the model reports.
type judgeMeter struct {
	mu       sync.Mutex
	took     []time.Duration
	prompt   []int
	complete []int
}

func (m *judgeMeter) serve(b *testing.B, upstream string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		start := time.Now()
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.Path[len("/v1"):], bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		var usage struct {
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(out, &usage)
		m.mu.Lock()
		m.took = append(m.took, took)
		m.prompt = append(m.prompt, usage.Usage.PromptTokens)
		m.complete = append(m.complete, usage.Usage.CompletionTokens)
		m.mu.Unlock()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// BenchmarkJudge: the text turn's first-sentence latency with the judge
// off and on, in one run (the turn model answers at once, paced turns as in
// BenchmarkTurnOverhead: the next message once persistence stored the
// answer, so each answer's judging overlaps the next turn), and the judge's
// cost per turn: its model request (the fact judge with the gpu-box
// profile: 150 ms to the first token, 140 tokens/s) and the tokens the
// model reports. The judge's own model backend is another fake than the
// turns' (with one GPU for both, vLLM batches the two; that cost is the
// backend's, not measured here).
func BenchmarkJudge(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "judge=off"
		if on {
			name = "judge=on"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b)
			h.fake.AddScript(fakeopenai.Script{Turns: []fakeopenai.Turn{fakeopenai.Text("Hello! How can I help you today?")}, Repeat: true})
			cfg := h.config(h.fake)
			cfg.Judge.Sample = 0
			meter := &judgeMeter{}
			if on {
				fake := fakeopenai.New(b, fakeopenai.WithResponder(factJudge), fakeopenai.WithProfile(fakeopenai.GPUBox))
				cfg.Judge.Sample, cfg.Judge.URL, cfg.Judge.Model = 1, meter.serve(b, fake.URL()), "fake-judge"
			}
			h.replica(cfg)
			judged := metrics.Default().Judged.WithLabelValues("judged")
			before := testutil.ToFloat64(judged)
			clock := newSentenceClock(b, h.nc)
			str, err := h.js.Stream(b.Context(), bus.StreamConversations)
			if err != nil {
				b.Fatal(err)
			}
			var lat []time.Duration
			var cid string
			var ch chan stamped
			turns := 0
			for i := 0; b.Loop(); i++ {
				if i%20 == 0 {
					cid = h.conversation()
					ch = clock.follow(cid)
				}
				b.StopTimer()
				info, err := str.Info(b.Context())
				if err == nil {
					err = rpc.WaitApplied(b.Context(), h.nc, bus.StreamConversations, info.State.LastSeq)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				lat = append(lat, clock.turn(b, h, cid, ch))
				turns++
			}
			b.StopTimer()
			if on {
				testkit.Eventually(b, 60*time.Second, func() bool { return testutil.ToFloat64(judged)-before >= float64(turns) }, "every answer judged")
				meter.mu.Lock()
				took := slices.Clone(meter.took)
				var prompt, complete int
				for i := range meter.prompt {
					prompt += meter.prompt[i]
					complete += meter.complete[i]
				}
				n := len(meter.took)
				meter.mu.Unlock()
				slices.Sort(took)
				b.ReportMetric(float64(took[n/2].Microseconds())/1000, "judge-p50-ms")
				b.ReportMetric(float64(took[(n-1)*99/100].Microseconds())/1000, "judge-p99-ms")
				b.ReportMetric(float64(prompt)/float64(n), "judge-prompt-tokens")
				b.ReportMetric(float64(complete)/float64(n), "judge-completion-tokens")
			}
			report(b, lat)
		})
	}
}

package fakeopenai_test

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// BenchmarkStreamInstant is the floor the fake adds to a turn: request sent
// through go-openai → first content delta received, zero latency injected.
func BenchmarkStreamInstant(b *testing.B) { benchmarkStream(b) }

// BenchmarkStreamGPUBox is the same under the gpu-box profile: the first
// delta after its time to first token (150 ms) and the fake's overhead.
func BenchmarkStreamGPUBox(b *testing.B) {
	benchmarkStream(b, fakeopenai.WithProfile(fakeopenai.GPUBox))
}

func benchmarkStream(b *testing.B, opts ...fakeopenai.Option) {
	s := fakeopenai.New(b, opts...)
	s.AddScript(fakeopenai.Script{Turns: []fakeopenai.Turn{fakeopenai.Text("Hello! How can I help you today?")}, Repeat: true})
	c := client(s, "")
	req := userMessage("hi")
	req.Stream = true
	var firsts []time.Duration
	for b.Loop() {
		start := time.Now()
		st, err := c.CreateChatCompletionStream(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		var first time.Duration
		for {
			resp, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if first == 0 && len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
				first = time.Since(start)
			}
		}
		st.Close()
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	pct := func(p float64) float64 {
		return float64(firsts[int(p*float64(len(firsts)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-first-ms")
	b.ReportMetric(pct(0.99), "p99-first-ms")
}

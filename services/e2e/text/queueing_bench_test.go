package text_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/services/llm"
)

// BenchmarkTurnQueueing: 200 conversations, each sending a message every
// 10 s (20 turns/s, random phase) for 30 s, the fake LLM answering with the
// GPU box's timing (150 ms to the first token, 140 tokens/s) three
// sentences; the llm with its default partitions (ALICIA_BENCH_LLM_PARTITIONS
// overrides them). It reports the first-sentence latency percentiles: when
// a partition answered one turn at a time, a turn whose partition was busy
// waited for another conversation's whole answer, which showed at p90/p99;
// now the replica holding a partition answers its conversations at once.
func BenchmarkTurnQueueing(b *testing.B) {
	const conversations, every, run = 200, 10 * time.Second, 30 * time.Second
	partitions := llm.DefaultConfig().Partitions
	if v := os.Getenv("ALICIA_BENCH_LLM_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		partitions = n
	}
	answer := "Tomorrow in Paris will be mostly sunny with a light breeze from the west. Expect a high of about twenty degrees in the afternoon. " +
		"It should stay dry through the evening, so it is a good day for a walk along the river."
	s := newStack(b, options{gateway: manyConnections(conversations), chat: &chatModel{answer: answer, profile: fakeopenai.GPUBox},
		llm: func(c *llm.Config) { c.Partitions = partitions }})
	clients, _ := openMany(b, s, conversations)
	b.ResetTimer()
	for range b.N {
		recs := loadTurns(b, clients, every, run, nil)
		b.StopTimer()
		var d []float64
		for _, r := range recs {
			d = append(d, float64(r.first().Microseconds())/1000)
		}
		slices.Sort(d)
		q := func(p float64) float64 { return d[int(p*float64(len(d)-1))] }
		b.ReportMetric(float64(partitions), "partitions")
		b.ReportMetric(float64(len(d)), "turns")
		b.ReportMetric(q(.5), "first-sentence-p50-ms")
		b.ReportMetric(q(.9), "first-sentence-p90-ms")
		b.ReportMetric(q(.99), "first-sentence-p99-ms")
		b.StartTimer()
	}
}

package demos_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/llm/internal/demos"
)

// BenchmarkSelect: choosing 3 demonstrations for a person with 400 rated
// turns (of 800 answered) among another person's 400; reports p50 and p99.
func BenchmarkSelect(b *testing.B) {
	s := newStore(b)
	topics := []string{"weather in Paris", "boiling pasta", "repotting a fern", "train to Lyon", "tax return", "guitar strings", "bread dough", "bike tyres"}
	for _, user := range []string{"ann", "bob"} {
		cid := "ac_" + user
		s.conversation(cid, user)
		prev := ""
		for i := range 400 {
			id := fmt.Sprintf("%s%d", user, i)
			s.turn(cid, id, prev, fmt.Sprintf("Question %d about %s, what do you think?", i, topics[i%len(topics)]),
				fmt.Sprintf("An answer about %s that goes on for a while, number %d.", topics[i%len(topics)], i))
			if i%2 == 0 {
				s.vote(cid, id, "up")
			} else {
				s.judge(cid, id, 0.5)
			}
			prev = id
		}
	}
	s.exec("ANALYZE") // as autovacuum keeps a live database: without statistics the plan is ~40x slower
	sel := demos.New(s.pool, 3)
	q := demos.Query{UserID: "ann", ConversationID: "ac_now", Text: "How long should I knead bread dough?", HistoryLimit: 50}
	ctx := context.Background()
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		ds, err := sel.Select(ctx, q)
		took = append(took, time.Since(start))
		if err != nil || len(ds) != 3 {
			b.Fatalf("%d demonstrations, %v", len(ds), err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

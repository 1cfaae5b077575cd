package persistence_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// BenchmarkBadEnvelopeInBatch applies one batch of 1000 envelopes (20
// realistic conversations) of which one sentence breaks a constraint
// (a NUL byte Postgres refuses in text), and reports the time to apply
// the batch: the culprit is isolated by bisection and dead-lettered.
func BenchmarkBadEnvelopeInBatch(b *testing.B) {
	s := newStack(b)
	s.cfg.BatchSize, s.cfg.Linger, s.cfg.Shards = 1000, 50*time.Millisecond, 1
	var envs []protocol.Envelope
	for c := range 20 {
		envs = append(envs, mixConversation(fmt.Sprintf("ac_bisect%02d", c))...)
	}
	bad := &envs[511]
	sentence := *bad.Body.(*protocol.AssistantSentence)
	sentence.Text = "broken \x00 text"
	bad.Body = &sentence
	var last uint64
	for _, env := range envs {
		if env.StanzaID > 0 {
			last = s.client(env.ConversationID, env.StanzaID, env.Body, env.Meta)
		} else {
			last = s.server(env.ConversationID, env.Body, env.Meta)
		}
	}
	b.ResetTimer()
	start := time.Now()
	s.start()
	s.history(envs[len(envs)-1].ConversationID, last)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(elapsed.Milliseconds()), "ms-to-apply")
	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences`); n != 20*36-1 {
		b.Fatalf("%d sentences applied, want %d", n, 20*36-1)
	}
}

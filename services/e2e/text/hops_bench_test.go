package text_test

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/otlptest"
)

// tracedHops are the steps of a turn's path, in path order, between
// timestamps of three clocks in one process: the WebSocket client's
// (sent, first.recv), JetStream's (*.stored: when the server took the
// message, before its write and fsync) and the services' spans.
var tracedHops = []struct{ name, from, to string }{
	{"ws-to-gateway", "sent", "edge.start"},                     // WebSocket frame, decode, limits
	{"gateway-to-stored", "edge.start", "user.stored"},          // encode, publish to the server
	{"user-stored-to-puback", "user.stored", "edge.end"},        // the message's write and fsync, the PubAck
	{"user-stored-to-llm-turn", "user.stored", "turn.start"},    // that fsync, sourcing into LLM_TURNS, its fsync, delivery
	{"llm-turn-to-start-stored", "turn.start", "start.stored"},  // last server envelope, features, outbox
	{"llm-turn-to-model", "turn.start", "model.start"},          // context: memory.search (and history.get when asked)
	{"memory-search", "search.start", "search.end"},             // rpc memory.search as the llm sees it
	{"memory-search-service", "service.start", "service.end"},   // the memory service's part: the prefetched search (or waiting for it)
	{"prefetch", "prefetch.start", "prefetch.end"},              // the search begun on the published message: embedding + pgvector
	{"user-to-prefetched", "user.stored", "prefetch.end"},       // that search done, to compare with user-stored-to-llm-turn
	{"model", "model.start", "model.end"},                       // the fake model's streamed answer
	{"model-to-sentence-stored", "model.end", "first.stored"},   // StartAnswer's PubAck awaited, the sentence published
	{"sentence-stored-to-client", "first.stored", "first.recv"}, // its fsync, the gateway's ordered consumer, WebSocket
}

// tracedSpans are the spans the hops read, by their key in tracedHops.
var tracedSpans = map[string]string{"edge": "edge.receive UserMessage", "turn": "llm.turn",
	"search": "rpc " + rpc.MemorySearchSubject, "service": rpc.MemorySearchSubject, "prefetch": "memory.prefetch",
	"model": "llm.model_request"}

// traceRatio is the share of turns traced (OTEL_TRACES_SAMPLER
// traceidratio): tracing every turn of the 200 conversations costs more
// CPU than the turns themselves on a small machine.
const traceRatio = 0.1

// traced reports whether the traceidratio sampler keeps trace id (hex), as
// the SDK decides it (sdk/trace TraceIDRatioBased): the id's last 8 bytes,
// shifted right once, below ratio × 2^63.
func traced(id string) bool {
	b, err := hex.DecodeString(id)
	ratio := traceRatio // a float64 variable, as the sampler's
	return err == nil && len(b) == 16 && binary.BigEndian.Uint64(b[8:])>>1 < uint64(ratio*(1<<63))
}

// BenchmarkTextTurnHops says where a text turn's time goes: the turns of
// BenchmarkTextTurnOverhead ("1") and of BenchmarkTextTurnOverhead200
// ("200") with the process tracing one turn in ten (OTLP to an in-process
// receiver, as otlptest sets it up). For each traced turn it joins the
// client's times, the JetStream timestamps of the conversation's
// envelopes and the services' spans, and reports the p50 of every hop
// (hop-*-ms). Tracing costs time of its own: these p50-ms are not the
// untraced benchmarks'.
//
//	go test -run '^$' -bench 'TextTurnHops/1$' -benchtime 1000x ./services/e2e/text/
//	go test -run '^$' -bench 'TextTurnHops/200$' -benchtime 1x ./services/e2e/text/
//
// Tracing is set up once, here in the parent benchmark (which runs once),
// and the turns are measured in sub-benchmarks.
func BenchmarkTextTurnHops(b *testing.B) {
	b.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", strconv.FormatFloat(traceRatio, 'g', -1, 64))
	recv := otlptest.Setup(b)
	b.Run("1", func(b *testing.B) {
		s := newStack(b, options{gateway: unpaced})
		c := s.open(b, aliceKey, "", 0)
		for range 20 {
			c.turnLatency()
		}
		recs := make([]turnRecord, 0, b.N)
		b.ResetTimer()
		for range b.N {
			r, err := c.measuredTurn("Hello there, how are you?")
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, r)
		}
		b.StopTimer()
		reportHops(b, recv, recs, readConversations(b, s, []string{c.cid}))
	})
	b.Run("200", func(b *testing.B) {
		const conversations, every, run = 200, 2 * time.Second, 20 * time.Second
		s := newStack(b, options{gateway: manyConnections(conversations)})
		clients, cids := openMany(b, s, conversations)
		b.ResetTimer()
		for range b.N {
			recs := loadTurns(b, clients, every, run, nil)
			b.StopTimer()
			reportHops(b, recv, recs, readConversations(b, s, cids))
			b.StartTimer()
		}
	})
}

// reportHops joins the times of each traced turn and reports the p50 of
// every hop; of many it reads an even sample of 300 (finding a trace's
// spans scans all the receiver holds).
func reportHops(b *testing.B, recv *otlptest.Receiver, recs []turnRecord, conv conversationsRead) {
	b.Helper()
	var lat, tracedLat []time.Duration
	var sample []turnRecord
	for _, r := range recs {
		lat = append(lat, r.first())
		if r.traceID == "" {
			b.Fatal("a sentence without a trace id: is the process tracing?")
		}
		if traced(r.traceID) {
			sample = append(sample, r)
			tracedLat = append(tracedLat, r.first())
		}
	}
	if step := len(sample) / 300; step > 1 {
		var every []turnRecord
		for i := 0; i < len(sample); i += step {
			every = append(every, sample[i])
		}
		sample = every
	}
	per := map[string][]time.Duration{}
	histories := 0
	for _, r := range sample {
		var spans otlptest.Spans
		testkit.EventuallyNoError(b, 20*time.Second, func() error {
			spans = recv.Trace(r.traceID)
			var names []string
			for _, n := range tracedSpans {
				names = append(names, n)
			}
			return spans.Missing(names...)
		}, "the turn's spans exported")
		at := map[string]time.Time{"sent": r.sent, "first.recv": r.firstAt,
			"user.stored": conv.user[r.userID], "start.stored": conv.stored[r.startSeq], "first.stored": conv.stored[r.firstSeq]}
		for key, name := range tracedSpans {
			sp := spans[name]
			at[key+".start"], at[key+".end"] = time.Unix(0, int64(sp.StartTimeUnixNano)), time.Unix(0, int64(sp.EndTimeUnixNano))
		}
		if spans["rpc "+rpc.HistorySubject] != nil {
			histories++
		}
		for _, h := range tracedHops {
			from, to := at[h.from], at[h.to]
			if from.IsZero() || to.IsZero() {
				b.Fatalf("turn %s: no %s or %s time", r.userID, h.from, h.to)
			}
			per[h.name] = append(per[h.name], to.Sub(from))
		}
	}
	b.ReportMetric(quantile(lat, 0.5), "p50-ms")
	b.ReportMetric(quantile(lat, 0.99), "p99-ms")
	b.ReportMetric(quantile(tracedLat, 0.5), "traced-p50-ms")
	b.ReportMetric(float64(len(sample)), "turns-read")
	b.ReportMetric(float64(histories), "history-gets")
	for _, h := range tracedHops {
		b.ReportMetric(quantile(per[h.name], 0.5), "hop-"+h.name+"-ms")
	}
	b.ReportMetric(0, "ns/op")
}

package tts_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/tts"
)

// BenchmarkSentenceToFirstAudio measures the tts's own latency with an
// instant speech backend: an AssistantSentence published (JetStream ack
// included, as the llm publishes it) → its first SpeechAudio chunk received
// on core NATS.
//
//   - steady: a later sentence of a turn the service already speaks;
//   - first: the turn's first sentence published right after its
//     StartAnswer (the turn is taken and its sentence reader started
//     meanwhile; the llm normally leaves far more time between the two).
//
// go test -run '^$' -bench SentenceToFirstAudio -benchtime 2000x ./services/tts/
func BenchmarkSentenceToFirstAudio(b *testing.B) {
	for _, mode := range []string{"steady", "first"} {
		b.Run(mode, func(b *testing.B) {
			h := newHarness(b, func(c *tts.Config) { c.MaxAhead = 100 })
			// 9 characters of 1 ms each: playout never holds synthesis back.
			h.fake.SetSpeech(fakeopenai.SpeechConfig{PerChar: time.Millisecond})
			first := make(chan time.Time, 16)
			sub, err := h.nc.Subscribe(subjects.AllAudioOut, func(m *nats.Msg) {
				env, err := protocol.Decode(m.Data)
				if err == nil && env.Body.(*protocol.SpeechAudio).Chunk == 0 {
					first <- time.Now()
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			const perTurn = 20
			var cid, turn string
			var seq int32
			b.ResetTimer()
			for i := range b.N {
				if mode == "first" || i%perTurn == 0 {
					if seq > 0 { // close the previous turn
						h.sentence(ctx, cid, turn, seq+1, "Goodbye.", true)
						<-first
					}
					cid, turn, seq = fmt.Sprintf("ac_b%d", i), fmt.Sprintf("am_b%d", i), 0
					h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
					if mode == "steady" { // the turn is taken before timing starts
						seq++
						h.sentence(ctx, cid, turn, seq, "Hi there.", false)
						<-first
					}
				}
				seq++
				start := time.Now()
				h.sentence(ctx, cid, turn, seq, "Hi there.", false)
				lat = append(lat, (<-first).Sub(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		})
	}
}

// BenchmarkFirstAudioAhead measures what synthesising a preemptive
// answer's first sentence ahead saves, with the gpu-box profile's speech
// timing (300 ms to first audio, 35× real time): a voice turn's first
// sentence published (right after its StartAnswer) → its first SpeechAudio
// chunk received.
//
//   - normal: the sentence is synthesised when it comes;
//   - ahead: the llm sent it on alicia.spec.{cid}.speak during the
//     end-of-turn silence and its synthesis ahead is over.
//
// go test -run '^$' -bench FirstAudioAhead -benchtime 30x ./services/tts/
func BenchmarkFirstAudioAhead(b *testing.B) {
	for _, mode := range []string{"normal", "ahead"} {
		b.Run(mode, func(b *testing.B) {
			h := newHarness(b, nil)
			h.fake.SetProfile(fakeopenai.Profile{Speech: fakeopenai.GPUBox.Speech})
			first := make(chan string, 16)
			sub, err := h.nc.Subscribe(subjects.AllAudioOut, func(m *nats.Msg) {
				env, err := protocol.Decode(m.Data)
				if a, ok := env.Body.(*protocol.SpeechAudio); err == nil && ok && a.Chunk == 0 {
					first <- a.MessageID
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				cid, turn := fmt.Sprintf("ac_fa%d", i), fmt.Sprintf("am_fa%d", i)
				if mode == "ahead" {
					ok := backendOK()
					h.specSpeak(cid, "Hi there.")
					testkit.Eventually(b, 10*time.Second, func() bool { return backendOK() == ok+1 }, "the synthesis ahead over")
				}
				b.StartTimer()
				h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
				start := time.Now()
				h.sentence(ctx, cid, turn, 1, "Hi there.", true)
				for id := range first {
					if id == turn {
						break
					}
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		})
	}
}

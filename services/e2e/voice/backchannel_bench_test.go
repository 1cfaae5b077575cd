package voice_test

import (
	"sort"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// BenchmarkBackchannel: answers a backchannel is said over ("mm-hmm",
// "yeah", "right", "okay", "uh-huh" in turn, 1.5 s into each answer): how
// many were stopped (goal 0 of N) and how long each was lowered while the
// words were decided (p50, p99 of the TurnEvent's heldMs). Run with
// -benchtime=10x.
func BenchmarkBackchannel(b *testing.B) {
	s := newStack(b, options{answer: longAnswer})
	s.speech.SetTranscriber(backchannelOrQuestion)
	cid := s.conversation()
	u := voiceclient.Join(b, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	var backs [][]int16
	for _, w := range []string{"Mm hmm.", "Yeah.", "Right.", "Okay.", "Uh huh."} {
		backs = append(backs, voiceclient.Speech(b, w))
	}
	question := voiceclient.Speech(b, "Tell me about the weather in Paris.")
	var held []float64
	stopped := 0
	seen := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		since := time.Now()
		u.Say(question)
		sa := u.WaitFor(20*time.Second, "no StartAnswer", func(e protocol.Envelope) bool {
			_, ok := e.Body.(*protocol.StartAnswer)
			return ok && answerAfter(u, e, since)
		}).Body.(*protocol.StartAnswer)
		testkit.Eventually(b, 20*time.Second, func() bool {
			n, _, _ := voiceclient.Loud(u.Heard(), since)
			return n >= 75
		}, "the agent never spoke")
		u.Say(backs[i%len(backs)])
		testkit.Eventually(b, 20*time.Second, func() bool {
			evs := turnEvents(b, s, cid, protocol.TurnEventKindBackchannel)
			if len(evs) > seen {
				seen = len(evs)
				held = append(held, float64(*evs[len(evs)-1].HeldMs))
				return true
			}
			for _, env := range s.stream(b, cid) {
				if cs, ok := env.Body.(*protocol.ControlStop); ok && cs.TargetID != nil && *cs.TargetID == sa.ID {
					stopped++
					return true
				}
			}
			return false
		}, "neither a backchannel nor a stop")
		playedOrStopped(b, s, sa.ID)
	}
	b.StopTimer()
	b.ReportMetric(float64(stopped), "stopped")
	b.ReportMetric(float64(b.N), "backchannels")
	if len(held) > 0 {
		sort.Float64s(held)
		b.ReportMetric(held[len(held)/2], "lowered-p50-ms")
		b.ReportMetric(held[(len(held)-1)*99/100], "lowered-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// answerAfter reports whether e arrived after since.
func answerAfter(u *voiceclient.User, e protocol.Envelope, since time.Time) bool {
	envs, at := u.Received(), u.ReceivedAt()
	for i := range envs {
		if envs[i].Body == e.Body {
			return at[i].After(since)
		}
	}
	return false
}

// playedOrStopped waits until the answer is over: every sentence recorded.
func playedOrStopped(b *testing.B, s *stack, id string) {
	b.Helper()
	testkit.EventuallyNoError(b, 30*time.Second, func() error {
		var open int
		if err := s.pool.QueryRow(b.Context(), `SELECT count(*) FILTER (WHERE playout_status NOT IN ('played', 'interrupted', 'unplayed'))
			FROM alicia_sentences WHERE message_id = $1`, id).Scan(&open); err != nil {
			return err
		}
		if open != 0 {
			return errorf("%d sentences not played yet", open)
		}
		return nil
	}, "the answer did not end")
}

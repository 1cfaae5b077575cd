package asr_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/asr/internal/metrics"
	"github.com/alicia-voice/alicia/services/asr/internal/worker"
)

// Hands-free mode (ASRJob.wakeWords): nothing of an utterance goes on the
// stream before its final transcript is known to be addressed. Partial and
// speculative transcripts go to the room-agent on core NATS; an addressed
// final one is published (addressed: true) with the user message without
// the wake word, and its speculative user message is that same request; one
// not addressed goes to the room-agent only, and no answer is started.
func TestHandsFree(t *testing.T) {
	for _, tc := range []struct {
		name, said, request string
		addressed           bool
	}{
		{"addressed", "Alisha, what is the weather like in Paris today?", "What is the weather like in Paris today?", true},
		{"not addressed", "Alice said the weather is nice in Paris today.", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			fake.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
				return fakeopenai.Transcript{Text: tc.said}
			})
			h.replica(h.config(fake))
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			transcripts, preempts := h.listen(subjects.SpecTranscript(cid)), h.listen(subjects.SpecPreempt(cid))
			finals := metrics.Default().Jobs.WithLabelValues("final", "not_addressed")
			before := testutil.ToFloat64(finals)
			words := []string{"alicia", "computer"}

			u := newUtterance(cid)
			partial := u.job(false, 600*time.Millisecond)
			partial.WakeWords = words
			h.publish(partial)
			testkit.Eventually(t, 5*time.Second, func() bool { return len(transcripts.all()) == 1 }, "partial transcript")
			spec := u.speculative(1500*time.Millisecond, 1300*time.Millisecond)
			spec.WakeWords = words
			h.publish(spec)
			testkit.Eventually(t, 5*time.Second, func() bool { return len(transcripts.all()) == 2 }, "partial and speculative transcripts")
			h.settled(t)
			for i, m := range transcripts.all() {
				tr := transcripts.envelope(t, i).Body.(*protocol.Transcription)
				if tr.Final || tr.Text != tc.said || tr.Addressed == nil || *tr.Addressed != tc.addressed {
					t.Errorf("core transcript %d (job %s) = %+v", i, m.Header.Get(worker.HeaderJob), tr)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.addressed]; len(preempts.all()) != want {
				t.Fatalf("%d speculative user messages, want %d", len(preempts.all()), want)
			}

			final := u.job(true, 1500*time.Millisecond)
			final.WakeWords = words
			h.publish(final)
			if !tc.addressed {
				testkit.Eventually(t, 5*time.Second, func() bool { return len(transcripts.all()) == 3 }, "unaddressed final transcript")
				h.settled(t)
				tr := transcripts.envelope(t, 2).Body.(*protocol.Transcription)
				if !tr.Final || tr.Addressed == nil || *tr.Addressed || tr.Text != tc.said || transcripts.all()[2].Header.Get(worker.HeaderJob) != final.ID {
					t.Errorf("unaddressed final transcript %+v", tr)
				}
				if all := rec.all(); len(all) != 0 {
					t.Errorf("%d envelopes on the stream for an unaddressed utterance, first %s", len(all), all[0].Env.Type)
				}
				if got := testutil.ToFloat64(finals); got != before+1 {
					t.Errorf("not_addressed finals counted %v, want %v", got, before+1)
				}
				return
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")
			all := rec.all()
			if len(all) != 2 {
				t.Fatalf("%d envelopes on the stream, want the final transcription and the user message", len(all))
			}
			tr := all[0].Env.Body.(*protocol.Transcription)
			if !tr.Final || tr.Text != tc.said || tr.Addressed == nil || !*tr.Addressed {
				t.Errorf("final transcription %+v", tr)
			}
			um := all[1].Env.Body.(*protocol.UserMessage)
			pm := preempts.envelope(t, 0).Body.(*protocol.UserMessage)
			if um.Content != tc.request || pm.Content != tc.request || um.ID != u.id {
				t.Errorf("user message %q, speculative %q; want %q", um.Content, pm.Content, tc.request)
			}
			if len(transcripts.all()) != 2 {
				t.Errorf("%d transcripts on core NATS, want the partial and the speculative one", len(transcripts.all()))
			}
		})
	}
}

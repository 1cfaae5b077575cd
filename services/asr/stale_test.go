package asr_test

import (
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// Jobs that queued up while no worker was free: the partials are overtaken
// by the final before anyone takes them, so only the final is transcribed.
func TestStalePartialsSkippedInBacklog(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	fake.SetTranscriber(fakeopenai.Growing(sentence, 250*time.Millisecond))
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	u := newUtterance(cid)
	h.publish(u.job(false, 500*time.Millisecond))
	h.publish(u.job(false, time.Second))
	h.publish(u.job(true, 1500*time.Millisecond))

	cfg := h.config(fake)
	cfg.Concurrency = 1
	h.replica(cfg)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 && h.queued() == 0 }, "final done")
	if got := texts(rec.transcriptions()); !slices.Equal(got, []string{"what is the weather like in"}) {
		t.Errorf("transcriptions %q, want the final only", got)
	}
	if n := fake.TranscriptionCount(); n != 1 {
		t.Errorf("%d transcription requests, want 1 (stale partials are not transcribed)", n)
	}
}

// A partial whose transcription comes back after a later job's must not be
// published: the client would see the transcript go backwards.
func TestStalePartialDropped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later bool // the later job is the final
		want  []string
	}{
		{"overtaken by the next partial", false, []string{"one two"}},
		{"overtaken by the final", true, []string{"one two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			// The first partial (0.5 s of audio) takes long; later jobs are instant.
			fake.SetTranscriber(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
				if r.Duration == 500*time.Millisecond {
					return fakeopenai.Transcript{Text: "one", Latency: 400 * time.Millisecond}
				}
				return fakeopenai.Transcript{Text: "one two"}
			})
			cfg := h.config(fake)
			cfg.Concurrency = 2
			h.replica(cfg)
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			u := newUtterance(cid)
			h.publish(u.job(false, 500*time.Millisecond))
			testkit.Eventually(t, 5*time.Second, func() bool { return fake.TranscriptionCount() == 1 }, "first partial at the backend")
			h.publish(u.job(tc.later, time.Second))
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.transcriptions()) == 1 }, "later transcription")
			testkit.Eventually(t, 5*time.Second, func() bool { return fake.Active() == 0 && h.queued() == 0 }, "slow partial done")
			if got := texts(rec.transcriptions()); !slices.Equal(got, tc.want) {
				t.Errorf("transcriptions %q, want %q", got, tc.want)
			}
			if tc.later {
				if n := len(rec.userMessages()); n != 1 {
					t.Errorf("%d user messages", n)
				}
				return
			}
			// The utterance goes on: its final is published after the dropped partial.
			h.publish(u.job(true, 1500*time.Millisecond))
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")
			if trs := rec.transcriptions(); len(trs) != 2 || !trs[1].Final {
				t.Errorf("transcriptions %q", texts(trs))
			}
		})
	}
}

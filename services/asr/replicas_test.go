package asr_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// stored counts the CONVERSATIONS envelopes on subjects matching filter.
func (h *harness) stored(filter string) int {
	s, err := h.js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

var allUserMessages = subjects.AllOfType(subjects.OriginClient, protocol.TypeUserMessage)

// Three replicas, each with its own backend: every one of them takes part
// of the load, and every job is done exactly once.
func TestReplicasShareJobs(t *testing.T) {
	h := newHarness(t)
	var fakes []*fakeopenai.Server
	for range 3 {
		f := fakeopenai.New(t)
		f.SetTranscriptionFault(fakeopenai.Fault{Latency: 30 * time.Millisecond})
		cfg := h.config(f)
		cfg.Concurrency = 1
		h.replica(cfg)
		fakes = append(fakes, f)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return h.waiting() == 3 }, "three replicas pulling")
	const convs, perConv = 10, 3
	for range convs {
		cid := protocol.NewID("ac")
		for range perConv {
			h.publish(newUtterance(cid).job(true, 500*time.Millisecond))
		}
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return h.stored(allUserMessages) == convs*perConv }, "every user message")
	testkit.Eventually(t, 5*time.Second, func() bool { return h.queued() == 0 }, "every job acknowledged")
	total := 0
	for i, f := range fakes {
		n := f.TranscriptionCount()
		if n == 0 {
			t.Errorf("replica %d did no job", i)
		}
		total += n
	}
	if total != convs*perConv {
		t.Errorf("%d transcriptions for %d jobs", total, convs*perConv)
	}
	t.Logf("jobs per replica: %d %d %d", fakes[0].TranscriptionCount(), fakes[1].TranscriptionCount(), fakes[2].TranscriptionCount())
}

// A replica stopped while its backend hangs on a job gives the job back at
// once: another replica completes it, well before the acknowledgement wait.
func TestReplicaKilledMidJob(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	hangFirst := func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		if calls.Add(1) == 1 {
			return fakeopenai.Transcript{Hang: true}
		}
		return fakeopenai.Transcript{Text: "Turn the lights off."}
	}
	var fakes []*fakeopenai.Server
	var stops []func()
	for range 3 {
		f := fakeopenai.New(t)
		f.SetTranscriber(hangFirst)
		cfg := h.config(f)
		cfg.AckWait, cfg.Timeout = 30*time.Second, 30*time.Second
		stops = append(stops, h.replica(cfg))
		fakes = append(fakes, f)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return h.waiting() == 3*4 }, "replicas pulling")
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	h.publish(newUtterance(cid).job(true, time.Second))
	victim := -1
	testkit.Eventually(t, 5*time.Second, func() bool {
		for i, f := range fakes {
			if f.Active() == 1 {
				victim = i
			}
		}
		return victim >= 0
	}, "a replica working on the job")
	start := time.Now()
	stops[victim]()
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "job completed by another replica")
	t.Logf("completed %s after the replica was stopped", time.Since(start).Round(time.Millisecond))
	if got := rec.userMessages()[0].Env.Body.(*protocol.UserMessage).Content; got != "Turn the lights off." {
		t.Errorf("user message %q", got)
	}
	if n := fakes[victim].TranscriptionCount(); n != 1 {
		t.Errorf("the stopped replica made %d requests", n)
	}
	if calls.Load() != 2 {
		t.Errorf("%d transcriptions, want the hung one and the one that completed", calls.Load())
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return h.queued() == 0 }, "job acknowledged")
}

// A worker that dies without a word (kill -9: no nak, no heartbeat): once
// AckWait passes, the job goes to a live replica.
func TestCrashedWorkerJobRedelivered(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	cfg := h.config(fake)
	cfg.AckWait = time.Second
	h.replica(cfg)() // makes the shared consumer, then goes away
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	h.publish(newUtterance(cid).job(true, time.Second))

	// The doomed worker takes the job and dies holding it.
	nc := natstest.Connect(t, h.ns)
	cons, err := natstest.JetStream(t, nc).Consumer(t.Context(), bus.StreamASRJobs, cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	taken := time.Now()

	h.replica(cfg)
	h.replica(cfg)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "job redelivered and completed")
	if waited := time.Since(taken); waited < cfg.AckWait {
		t.Errorf("completed %s after the crash, before AckWait %s: was it ever held?", waited, cfg.AckWait)
	}
	if n := fake.TranscriptionCount(); n != 1 {
		t.Errorf("%d transcriptions", n)
	}
}

// A transcription slower than AckWait stays with its replica: the
// heartbeats keep the job from going to another one.
func TestSlowBackendNotRedelivered(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	fake.SetTranscriptionFault(fakeopenai.Fault{Latency: 2500 * time.Millisecond})
	cfg := h.config(fake)
	cfg.AckWait, cfg.Timeout = time.Second, 10*time.Second
	h.replica(cfg)
	h.replica(cfg)
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	h.publish(newUtterance(cid).job(true, time.Second))
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rec.userMessages()) == 1 && h.queued() == 0 }, "job done")
	if n := fake.TranscriptionCount(); n != 1 {
		t.Errorf("%d transcriptions of one job (redelivered while its replica worked on it)", n)
	}
}

package asr_test

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/svcmain/svcmaintest"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestDrainFinishesTheJobInProgress sends SIGTERM to the asr binary while
// its (fake, slow) backend transcribes a job: /healthz reports draining, the
// job is finished and stored once, the process exits 0, and a job queued
// after the signal is left to another replica, which does it.
func TestDrainFinishesTheJobInProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	h := newHarness(t)
	slow := fakeopenai.New(t)
	slow.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		return fakeopenai.Transcript{Text: "Drained in full.", Latency: 3 * time.Second}
	})
	addr := testkit.FreeAddr(t)
	bin := svcmaintest.Build(t, "./cmd/asr")
	p := svcmaintest.Start(t, bin, "ALICIA_NATS_URL="+h.ns.ClientURL(), "ALICIA_ASR_URL="+slow.URL(),
		"ALICIA_ASR_METRICS_ADDR="+addr, "ALICIA_ASR_TIMEOUT=30s", "ALICIA_ASR_PULL_WAIT=200ms",
		"ALICIA_SHUTDOWN_TIMEOUT=40s", "ALICIA_LOG_LEVEL=warn")
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusOK, "ok"), "asr ready")

	cid := protocol.NewID("ac")
	rec := h.record(cid)
	h.publish(newUtterance(cid).job(true, time.Second))
	testkit.Eventually(t, 30*time.Second, func() bool { return slow.Active() == 1 }, "the job reached the backend")

	p.Signal(syscall.SIGTERM)
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusServiceUnavailable, "draining"),
		"/healthz does not report draining")
	later := protocol.NewID("ac")
	laterRec := h.record(later)
	h.publish(newUtterance(later).job(true, time.Second))

	if code := p.Wait(90 * time.Second); code != 0 {
		t.Fatalf("asr exited %d after SIGTERM, want 0", code)
	}
	// Stored before the exit; the recorder reads the stream a moment later.
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "the job in progress at SIGTERM finished")
	if n := slow.TranscriptionCount(); n != 1 {
		t.Fatalf("the draining asr made %d transcriptions, want 1 (no job taken after the signal)", n)
	}

	other := fakeopenai.New(t)
	h.replica(h.config(other))
	testkit.Eventually(t, 30*time.Second, func() bool { return len(laterRec.userMessages()) == 1 }, "the job queued after the signal done by another replica")
	testkit.Eventually(t, 30*time.Second, func() bool { return h.queued() == 0 }, "every job acknowledged")
	if n := len(rec.userMessages()); n != 1 || other.TranscriptionCount() != 1 {
		t.Fatalf("after the other replica: %d user messages for the drained job, %d transcriptions there; want 1 and 1", n, other.TranscriptionCount())
	}
}

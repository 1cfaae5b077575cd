package llm_test

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

// TestDrainFinishesTheRunningTurn sends SIGTERM to the llm binary while the
// fake model streams a turn's answer slowly: /healthz reports draining, the
// turn is answered in full, once, the process exits 0, and a turn queued
// after the signal is left to another replica, which answers it.
func TestDrainFinishesTheRunningTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	h := newHarness(t)
	slow := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("One slow sentence. Another slow sentence to finish.")))
	slow.SetFault(fakeopenai.Fault{ChunkDelay: 300 * time.Millisecond})
	addr := testkit.FreeAddr(t)
	bin := svcmaintest.Build(t, "./cmd/llm")
	p := svcmaintest.Start(t, bin, "ALICIA_NATS_URL="+h.ns.ClientURL(), "ALICIA_POSTGRES_URL="+h.pgURL,
		"ALICIA_LLM_URL="+slow.URL(), "ALICIA_LLM_MODEL=fake-chat", "ALICIA_LLM_PARTITIONS=8",
		"ALICIA_LLM_METRICS_ADDR="+addr, "ALICIA_LLM_SHUTDOWN_GRACE=40s", "ALICIA_SHUTDOWN_TIMEOUT=45s", "ALICIA_LOG_LEVEL=warn")
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusOK, "ok"), "llm ready")

	cid := h.conversation()
	w := h.watch(cid)
	uid := h.say(cid, "take your time")
	w.until(t, 30*time.Second, "the turn started", func(envs []seen) bool { return answerOf(envs, uid) != nil })

	p.Signal(syscall.SIGTERM)
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusServiceUnavailable, "draining"),
		"/healthz does not report draining")
	later := h.conversation()
	lw := h.watch(later)
	lid := h.say(later, "after the signal")

	if code := p.Wait(90 * time.Second); code != 0 {
		t.Fatalf("llm exited %d after SIGTERM, want 0", code)
	}
	envs := w.all()
	sa := answerOf(envs, uid)
	if !finished(envs, sa.ID) {
		t.Fatal("the running turn was not finished before the exit")
	}
	if n := len(bodies[*protocol.StartAnswer](envs)); n != 1 {
		t.Fatalf("%d answers to the running turn, want 1", n)
	}
	if n := len(slow.Requests()); n != 1 {
		t.Fatalf("the draining llm sent %d model requests, want 1 (no turn taken after the signal)", n)
	}

	other := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("Answered by the other replica.")))
	h.replica(h.config(other))
	lw.answered(t, lid)
	if n := len(bodies[*protocol.StartAnswer](lw.all())); n != 1 {
		t.Fatalf("%d answers to the turn queued after the signal, want 1", n)
	}
	if n := len(bodies[*protocol.StartAnswer](w.all())); n != 1 {
		t.Fatalf("the other replica answered the drained turn again: %d answers", n)
	}
}

package llm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

func errorsFor(envs []seen, aid string) []*protocol.ErrorMessage {
	var out []*protocol.ErrorMessage
	for _, e := range bodies[*protocol.ErrorMessage](envs) {
		if e.OriginatingID != nil && *e.OriginatingID == aid {
			out = append(out, e)
		}
	}
	return out
}

// failedTurn waits for the ErrorMessage of the answer to uid.
func (w *watcher) failedTurn(t *testing.T, uid string) (*protocol.StartAnswer, *protocol.ErrorMessage) {
	t.Helper()
	var sa *protocol.StartAnswer
	var em *protocol.ErrorMessage
	w.until(t, 15*time.Second, "ErrorMessage for "+uid, func(envs []seen) bool {
		sa = answerOf(envs, uid)
		if sa == nil {
			return false
		}
		if es := errorsFor(envs, sa.ID); len(es) > 0 {
			em = es[0]
		}
		return em != nil
	})
	return sa, em
}

// The backend answering 500: the request is retried, then the client gets
// ErrorMessage 503 (recoverable), the answer row is marked failed, and once
// the backend is back the next turn is answered (without the failed one in
// its context).
func TestBackendFailure(t *testing.T) {
	cases := []struct {
		name  string
		fault fakeopenai.Fault
	}{
		{"500", fakeopenai.Fault{Status: 500}},
		{"down", fakeopenai.Fault{Down: true}},
		{"hangs", fakeopenai.Fault{Hang: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(h.fake)
			cfg.Attempts, cfg.Timeout = 3, 300*time.Millisecond
			h.replica(cfg)
			cid := h.conversation()
			w := h.watch(cid)
			h.fake.SetFault(c.fault)
			uid := h.say(cid, "are you there?")
			sa, em := w.failedTurn(t, uid)
			if em.Code != protocol.CodeBackendUnavailable || !em.Recoverable || em.Severity != 2 || !strings.Contains(em.Message, "unavailable") {
				t.Fatalf("ErrorMessage %+v", em)
			}
			if n := len(h.fake.Requests()); n != 3 {
				t.Fatalf("%d model requests, want 3 attempts", n)
			}
			h.row(t, sa.ID, func(r row) bool { return r.status == "failed" })

			h.fake.SetFault(fakeopenai.Fault{})
			h.fake.Enqueue(fakeopenai.Text("Yes, I am back."))
			uid2 := h.say(cid, "and now?")
			sa2, sents, _ := w.answered(t, uid2)
			if len(sents) != 1 || sents[0].Text != "Yes, I am back." {
				t.Fatalf("answer after recovery %+v", sents)
			}
			h.row(t, sa2.ID, func(r row) bool { return r.status == "completed" })
			if got := lastContext(h.fake); len(got) != 2 || got[0] != "user:are you there?" || got[1] != "user:and now?" {
				t.Fatalf("context after the failure %q", got)
			}
		})
	}
}

// A failure after sentences were sent keeps them and reports the error.
func TestBackendFailsMidStream(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.SetFault(fakeopenai.Fault{DropAfter: 8})
	h.fake.Enqueue(fakeopenai.Text("One. Two. Three. Four. Five. Six. Seven. Eight."))
	uid := h.say(cid, "count")
	sa, em := w.failedTurn(t, uid)
	if em.Code != protocol.CodeBackendUnavailable {
		t.Fatalf("ErrorMessage %+v", em)
	}
	envs := w.all()
	said := sentencesOf(envs, sa.ID)
	if len(said) == 0 || finished(envs, sa.ID) {
		t.Fatalf("sentences %+v: want the ones sent before the cut, none final", said)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests: a stream that already spoke must not be retried", n)
	}
	var texts []string
	for _, s := range said {
		texts = append(texts, s.Text)
	}
	h.row(t, sa.ID, func(r row) bool { return r.status == "failed" && r.contents == strings.Join(texts, " ") })
}

// The circuit breaker opens after consecutive failures: turns then fail at
// once without calling the backend; after the cool-down a probe closes it.
func TestCircuitBreaker(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(h.fake)
	cfg.Attempts, cfg.BreakerFailures, cfg.BreakerCooldown = 1, 2, 500*time.Millisecond
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.SetFault(fakeopenai.Fault{Status: 503})
	for i := range 2 {
		w.failedTurn(t, h.say(cid, "fail "+string(rune('a'+i))))
	}
	if n := len(h.fake.Requests()); n != 2 {
		t.Fatalf("%d requests for two failed turns", n)
	}
	start := time.Now()
	_, em := w.failedTurn(t, h.say(cid, "fail fast"))
	if d := time.Since(start); em.Code != protocol.CodeBackendUnavailable || d > 400*time.Millisecond {
		t.Fatalf("open breaker: %+v after %s", em, d)
	}
	if n := len(h.fake.Requests()); n != 2 {
		t.Fatalf("the open breaker let a request through (%d requests)", n)
	}
	h.fake.SetFault(fakeopenai.Fault{})
	h.fake.AddScript(fakeopenai.Script{Turns: []fakeopenai.Turn{fakeopenai.Text("Recovered.")}, Repeat: true})
	// Turns keep failing fast until the cool-down ends; then the probe succeeds.
	for i := 0; ; i++ {
		uid := h.say(cid, "probe")
		var done bool
		envs := w.until(t, 10*time.Second, "probe turn", func(envs []seen) bool {
			sa := answerOf(envs, uid)
			done = sa != nil && finished(envs, sa.ID)
			return sa != nil && (done || len(errorsFor(envs, sa.ID)) > 0)
		})
		_ = envs
		if done {
			break
		}
		if i > 50 {
			t.Fatal("breaker never closed")
		}
		time.Sleep(50 * time.Millisecond) // the cool-down is what is under test
	}
}

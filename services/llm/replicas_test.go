package llm_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Two replicas: the turns of one conversation never interleave and keep
// their order, on the replica holding its partition; turns of different
// conversations are spread over both.
func TestTwoReplicas(t *testing.T) {
	h := newHarness(t)
	answer := fakeopenai.Text("Sentence one. Sentence two. Sentence three.")
	fa := fakeopenai.New(t, fakeopenai.WithFallback(answer))
	fb := fakeopenai.New(t, fakeopenai.WithFallback(answer))
	for _, f := range []*fakeopenai.Server{fa, fb} {
		f.SetFault(fakeopenai.Fault{ChunkDelay: 3 * time.Millisecond})
	}
	h.replica(h.config(fa))
	h.replica(h.config(fb))

	t.Run("one conversation in order", func(t *testing.T) {
		beforeA, beforeB := len(fa.Requests()), len(fb.Requests())
		cid := h.conversation()
		w := h.watch(cid)
		var uids []string
		for i := range 5 {
			uids = append(uids, h.say(cid, "message "+string(rune('1'+i))))
		}
		w.until(t, 20*time.Second, "five answers", func(envs []seen) bool {
			for _, u := range uids {
				if sa := answerOf(envs, u); sa == nil || !finished(envs, sa.ID) {
					return false
				}
			}
			return true
		})
		// In stream order, each answer's envelopes come after the previous
		// answer's final sentence, and answers follow the messages' order.
		var order []string
		open := ""
		for _, s := range w.all() {
			switch b := s.Env.Body.(type) {
			case *protocol.StartAnswer:
				if open != "" {
					t.Fatalf("answer %s started while %s was still streaming", b.ID, open)
				}
				open = b.ID
				order = append(order, b.PreviousID)
			case *protocol.AssistantSentence:
				if b.PreviousID != open {
					t.Fatalf("sentence of %s while %s is streaming", b.PreviousID, open)
				}
				if b.IsFinal != nil && *b.IsFinal {
					open = ""
				}
			}
		}
		if strings.Join(order, ",") != strings.Join(uids, ",") {
			t.Fatalf("answered %v, want %v", order, uids)
		}
		if a, b := len(fa.Requests())-beforeA, len(fb.Requests())-beforeB; a+b != 5 {
			t.Fatalf("replica a answered %d turns, b %d: want 5", a, b)
		}
	})

	t.Run("conversations spread over both replicas", func(t *testing.T) {
		// The partitions may all be held by the replica that pulled first;
		// it gives those over its share (5 of 8) up within seconds (queue
		// balancing), so rounds of turns of 24 conversations (over most
		// partitions) go on until both replicas answer some of a round.
		var cids []string
		var ws []*watcher
		for range 24 {
			cid := h.conversation()
			cids, ws = append(cids, cid), append(ws, h.watch(cid))
		}
		deadline := time.Now().Add(20 * time.Second)
		for r := 1; ; r++ {
			beforeA, beforeB := len(fa.Requests()), len(fb.Requests())
			var wg sync.WaitGroup
			for i, cid := range cids {
				wg.Go(func() { ws[i].answered(t, h.say(cid, "turn "+strconv.Itoa(r))) })
			}
			wg.Wait()
			a, b := len(fa.Requests())-beforeA, len(fb.Requests())-beforeB
			if a+b != len(cids) {
				t.Fatalf("round %d: replica a answered %d turns, b %d: want %d", r, a, b, len(cids))
			}
			if a > 0 && b > 0 {
				t.Logf("round %d: replica a %d, replica b %d", r, a, b)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %d rounds, the last answered by replica a %d, b %d: want both", r, a, b)
			}
		}
	})
}

// A replica that dies mid-answer: another takes the turn over and finishes
// the answer after what was already said, with no sentence repeated.
func TestReplicaDiesMidTurn(t *testing.T) {
	cases := []struct {
		name    string
		ackWait time.Duration
		kill    func(p *proxy, stop func())
	}{
		// The process is gone: its connection drops, the turn comes back after AckWait.
		{"crash", time.Second, func(p *proxy, _ func()) { p.kill() }},
		// A stopping replica gives the turn back at once.
		{"shutdown", 30 * time.Second, func(_ *proxy, stop func()) { stop() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			fa := fakeopenai.New(t)
			fa.SetFault(fakeopenai.Fault{ChunkDelay: 50 * time.Millisecond})
			fa.Enqueue(fakeopenai.Text("One. Two. Three. Four. Five. Six."))
			fb := fakeopenai.New(t)
			fb.On(fakeopenai.LastUserContains("Continue your previous answer"), fakeopenai.Text("Five. Six."))

			p := newProxy(t, h.ns.Addr().String())
			ca := h.config(fa)
			ca.NATSURL, ca.AckWait = p.url(), c.ackWait
			stopA := h.replica(ca)
			cid := h.conversation()
			w := h.watch(cid)
			uid := h.say(cid, "count to six")
			var aid string
			w.until(t, 10*time.Second, "two sentences from replica a", func(envs []seen) bool {
				if sa := answerOf(envs, uid); sa != nil {
					aid = sa.ID
					return len(sentencesOf(envs, aid)) >= 2
				}
				return false
			})
			cb := h.config(fb)
			cb.AckWait = c.ackWait
			h.replica(cb)
			c.kill(p, stopA)

			_, sents, envs := w.answered(t, uid)
			var texts []string
			for i, s := range sents {
				if s.Sequence != int32(i+1) {
					t.Fatalf("sentence %d has sequence %d", i+1, s.Sequence)
				}
				texts = append(texts, s.Text)
			}
			got := strings.Join(texts, " ")
			if !strings.HasPrefix(got, "One. Two.") || !strings.HasSuffix(got, "Five. Six.") || strings.Count(got, "Five.") != 1 {
				t.Fatalf("answer %q", got)
			}
			if n := len(bodies[*protocol.StartAnswer](envs)); n != 1 {
				t.Fatalf("%d StartAnswers, want the one answer", n)
			}
			// Replica b was given what had been said and asked to go on.
			reqs := fb.Requests()
			if len(reqs) != 1 {
				t.Fatalf("replica b made %d requests", len(reqs))
			}
			msgs := reqs[0].Messages
			if prefix := msgs[len(msgs)-2]; prefix.Role != "assistant" || !strings.HasPrefix(prefix.Content, "One. Two.") {
				t.Fatalf("replica b's prompt ends with %+v", msgs[len(msgs)-2:])
			}
			h.row(t, aid, func(r row) bool { return r.status == "completed" && r.contents == got })
		})
	}
}

package llm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// ControlStop mid-answer cancels the model stream within 50 ms; what was
// said is kept (completed, interrupted), nothing more is said, and the next
// turn runs.
func TestStopMidAnswer(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cases := []struct {
		name  string
		stop  func(aid string) *protocol.ControlStop
		stops bool
	}{
		{"targeted", func(aid string) *protocol.ControlStop {
			return &protocol.ControlStop{TargetID: &aid, StopType: protocol.Ptr(protocol.ControlStopStopTypeGeneration)}
		}, true},
		{"whatever runs", func(string) *protocol.ControlStop { return &protocol.ControlStop{} }, true},
		{"all", func(aid string) *protocol.ControlStop {
			return &protocol.ControlStop{TargetID: &aid, StopType: protocol.Ptr(protocol.ControlStopStopTypeAll)}
		}, true},
		{"speech (barge-in)", func(aid string) *protocol.ControlStop {
			return &protocol.ControlStop{TargetID: &aid, StopType: protocol.Ptr(protocol.ControlStopStopTypeSpeech)}
		}, true},
		{"speech, whatever runs", func(string) *protocol.ControlStop {
			return &protocol.ControlStop{StopType: protocol.Ptr(protocol.ControlStopStopTypeSpeech)}
		}, true},
		{"another answer", func(string) *protocol.ControlStop { return &protocol.ControlStop{TargetID: protocol.Ptr("am_other")} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cid, w, uid, aid := h.countToTen(t)
			stop := c.stop(aid)
			stop.ConversationID = cid
			at := time.Now()
			stopSeq := h.client(cid, stop)
			if !c.stops {
				_, sents, _ := w.answered(t, uid)
				if len(sents) != 10 {
					t.Fatalf("%d sentences, want the whole answer", len(sents))
				}
				return
			}
			err := testkit.CheckFor(time.Second, time.Millisecond, func() error {
				if h.fake.Active() > 0 {
					return errors.New("model request still streaming")
				}
				return nil
			})
			took := time.Since(at)
			// How fast is BenchmarkStop's figure (1.7 ms p50); here the stop must end the
			// model's stream, and the answer must not run to its end (below).
			if err != nil {
				t.Fatalf("model stream still open %s after the stop: %v", took, err)
			}
			t.Logf("stream cancelled %s after the stop", took.Round(time.Microsecond))

			// The next turn runs and nothing more of the stopped answer is said.
			h.fake.SetFault(fakeopenai.Fault{})
			h.fake.Enqueue(fakeopenai.Text("Eleven."))
			next := h.say(cid, "go on")
			_, _, envs := w.answered(t, next)
			var said []string
			late := 0
			for _, s := range envs {
				if b, ok := s.Env.Body.(*protocol.AssistantSentence); ok && b.PreviousID == aid {
					said = append(said, b.Text)
					if s.Seq > stopSeq {
						late++
					}
					if b.IsFinal != nil && *b.IsFinal {
						t.Fatalf("a stopped answer got a final sentence")
					}
				}
			}
			if late > 1 || len(said) >= 10 {
				t.Fatalf("%d sentences after the stop (%d in all)", late, len(said))
			}
			if stop.TargetID == nil {
				// The llm names the answer the stop cut, with the stop's kind.
				want := protocol.ControlStopStopTypeGeneration
				if stop.StopType != nil && *stop.StopType == protocol.ControlStopStopTypeSpeech {
					want = protocol.ControlStopStopTypeSpeech
				}
				named := false
				for _, s := range envs {
					if b, ok := s.Env.Body.(*protocol.ControlStop); ok && strings.Contains(s.Subject, ".server.") && b.TargetID != nil && *b.TargetID == aid {
						named = b.StopType != nil && *b.StopType == want
					}
				}
				if !named {
					t.Fatalf("no server ControlStop naming %s with stopType %s", aid, want)
				}
			}
			r := h.row(t, aid, func(r row) bool { return r.status == "completed" && r.interrupted })
			if r.contents != strings.Join(said, " ") {
				t.Fatalf("contents %q, want what was said: %q", r.contents, strings.Join(said, " "))
			}
			// The next turn's context holds the partial answer the user heard.
			reqs := h.fake.Requests()
			ctx := reqs[len(reqs)-1].Messages
			if prev := ctx[len(ctx)-2]; prev.Role != "assistant" || prev.Content != r.contents {
				t.Fatalf("context before the next question: %+v", prev)
			}
		})
	}
}

// countToTen starts a slow answer of ten sentences in a new conversation and
// returns once two of them are out: the conversation, its watcher, the
// user's message and the answer.
func (h *harness) countToTen(t testing.TB) (cid string, w *watcher, uid, aid string) {
	t.Helper()
	cid = h.conversation()
	w = h.watch(cid)
	h.fake.Reset()
	h.fake.SetFault(fakeopenai.Fault{ChunkDelay: 25 * time.Millisecond})
	h.fake.Enqueue(fakeopenai.Text("One. Two. Three. Four. Five. Six. Seven. Eight. Nine. Ten."))
	uid = h.say(cid, "count to ten")
	w.until(t, 10*time.Second, "two sentences", func(envs []seen) bool {
		sa := answerOf(envs, uid)
		if sa != nil {
			aid = sa.ID
		}
		return sa != nil && len(sentencesOf(envs, sa.ID)) >= 2
	})
	return cid, w, uid, aid
}
